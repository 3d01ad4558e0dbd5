/* Runs the C compiler driver as the linker: it knows the system's crt
 * files and library paths, which a direct ld call would have to guess. */
#define _POSIX_C_SOURCE 200809L
#include "link.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

bool link_program(const char *const *objects, int num_objects, const char *const *libraries,
                  int num_libraries, const char *output, bool shared, char *err,
                  size_t err_size) {
  const char *driver = getenv("CC");
  if (!driver || !*driver)
    driver = "cc";
  char **argv = calloc((size_t)(num_objects + num_libraries) + 6, sizeof(char *));
  if (!argv) {
    snprintf(err, err_size, "link: out of memory");
    return false;
  }
  int argc = 0;
  argv[argc++] = (char *)driver;
  if (shared)
    argv[argc++] = "-shared";
  argv[argc++] = "-o";
  argv[argc++] = (char *)output;
  for (int i = 0; i < num_objects; i++)
    argv[argc++] = (char *)objects[i];
  for (int i = 0; i < num_libraries; i++)
    argv[argc++] = (char *)libraries[i];
  argv[argc] = NULL;
  pid_t pid;
  int status = 0;
  int rc = posix_spawnp(&pid, driver, NULL, NULL, argv, environ);
  free(argv);
  if (rc != 0) {
    snprintf(err, err_size, "link: cannot run '%s'", driver);
    return false;
  }
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(err, err_size, "link: '%s%s -o %s ...' failed (status %d)", driver,
             shared ? " -shared" : "", output, status);
    return false;
  }
  return true;
}

bool link_shared_object(const char *const *objects, int num_objects, const char *output, char *err,
                        size_t err_size) {
  return link_program(objects, num_objects, NULL, 0, output, true, err, err_size);
}

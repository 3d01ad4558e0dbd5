/* A save that dies part-way (here: killed by SIGXFSZ when the file size limit
 * is hit while the temporary file is written) leaves the old checkpoint intact;
 * a save that fails cleanly also removes its temporary file. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SMALL = 64, LARGE = 1 << 18 };

static char path[512];
static float old_data[SMALL], new_data[LARGE], loaded[SMALL];

static tfm_tensor old_ckpt = {"layer.w", TFM_F32, 1, {SMALL}, old_data};
static tfm_tensor new_ckpt = {"layer.w", TFM_F32, 1, {LARGE}, new_data};

/* Saves the large checkpoint under a 16 KiB file size limit. */
static void save_over_size_limit(void) {
  struct rlimit no_core = {0, 0}, small_files = {16384, 16384};
  setrlimit(RLIMIT_CORE, &no_core);
  setrlimit(RLIMIT_FSIZE, &small_files);
  tfm_ckpt_save(path, &new_ckpt, 1, NULL);
}

static void check_old_checkpoint_intact(void) {
  memset(loaded, 0, sizeof loaded);
  tfm_tensor into = old_ckpt;
  into.data = loaded;
  CHECK_OK(tfm_ckpt_load(path, &into, 1, NULL));
  CHECK(memcmp(loaded, old_data, sizeof old_data) == 0);
}

static int exists(const char *file) {
  struct stat st;
  return stat(file, &st) == 0;
}

int main(void) {
  scratch_path(path, sizeof path, "model.safetensors");
  for (int i = 0; i < SMALL; i++) old_data[i] = (float)i;
  for (int i = 0; i < LARGE; i++) new_data[i] = (float)-i;
  CHECK_OK(tfm_ckpt_save(path, &old_ckpt, 1, NULL));

  /* A crash before the rename: the process is killed inside the write. */
  pid_t child = fork();
  if (child == 0) {
    save_over_size_limit();
    _exit(0); /* not reached: SIGXFSZ kills the process */
  }
  int wstatus = 0;
  CHECK(waitpid(child, &wstatus, 0) == child);
  CHECK(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXFSZ);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)child);
  CHECK(exists(tmp)); /* the crash really happened mid-save */
  unlink(tmp);
  check_old_checkpoint_intact();

  /* The same failure reported instead of fatal: an error, and no leftovers. */
  child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    save_over_size_limit();
    const char *message = tfm_error();
    _exit(strstr(message, path) && strstr(message, "writing temporary file") &&
                  strstr(message, "File too large")
              ? 0
              : 1);
  }
  CHECK(waitpid(child, &wstatus, 0) == child);
  CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)child);
  CHECK(!exists(tmp));
  check_old_checkpoint_intact();

  char nowhere[600];
  scratch_path(nowhere, sizeof nowhere, "no-such-dir/model.safetensors");
  CHECK_REFUSED(tfm_ckpt_save(nowhere, &old_ckpt, 1, NULL), nowhere,
                "cannot create temporary file");

  scratch_dir_remove();
  return check_result("ckpt_atomic");
}

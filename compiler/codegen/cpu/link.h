/* Linking generated objects with the system C compiler driver. */
#ifndef TFM_LINK_H
#define TFM_LINK_H

#include <stdbool.h>
#include <stddef.h>

/* cc -shared -o output objects... ; the driver is $CC when set, else "cc".
 * On failure err holds the driver's exit status. */
bool link_shared_object(const char *const *objects, int num_objects, const char *output, char *err,
                        size_t err_size);

/* cc [-shared] -o output objects... libraries... (libraries are passed as
 * given: paths of archives or -l flags). */
bool link_program(const char *const *objects, int num_objects, const char *const *libraries,
                  int num_libraries, const char *output, bool shared, char *err,
                  size_t err_size);

#endif

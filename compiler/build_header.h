/* The C header of a model built as a shared library (tfmc build --shared). */
#ifndef TFM_BUILD_HEADER_H
#define TFM_BUILD_HEADER_H
#include "header.h"

/* Writes the header of `model` (codegen/header.h) to `path`: 0 on success;
 * errors are reported through diag and leave no file behind. */
int build_write_header(const char *path, const HeaderModel *model);

#endif

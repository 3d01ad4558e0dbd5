/* Functions of a library opened with dlopen (the CUDA driver, cuBLAS). */
#ifndef TFM_DL_H
#define TFM_DL_H

/* Looks up `name` in `library` and stores it in the function pointer at
 * `field`; returns 0 if found, nonzero (and leaves *field) if not. Callers
 * word their own message: which library, and what a missing symbol means. */
int tfm_dl_symbol(void *library, const char *name, void *field);

#endif

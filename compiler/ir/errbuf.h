/* Error messages into a caller's buffer, the convention of the passes,
 * shape rules and backends that take (char *err, size_t err_size). */
#ifndef TFM_ERRBUF_H
#define TFM_ERRBUF_H
#include <stdbool.h>
#include <stddef.h>

/* Formats into err (when size > 0) and returns false, for `return errbuf_set(...)`. */
bool errbuf_set(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif

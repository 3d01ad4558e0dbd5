/* An open document's text as the editor has it, and the two ways of
 * counting columns: the front end counts bytes from 1, LSP counts UTF-16
 * code units from 0. */
#ifndef TFM_LSP_DOCUMENT_H
#define TFM_LSP_DOCUMENT_H
#include <stddef.h>

typedef struct Document {
  char *uri;
  char *path;   /* the file the URI names: where imports are looked up from */
  char *text;   /* NUL-terminated, malloc'd */
  size_t len;
  long version;
} Document;

/* The byte offset of an LSP position (0-based line, UTF-16 character),
 * clamped to the line's end and the text's end. */
size_t doc_offset(const char *text, size_t len, long line, long character);
/* The same position as the front end counts it: a 1-based byte column. */
int doc_byte_col(const char *text, size_t len, long line, long character);
/* The UTF-16 character of a 1-based byte column on a 1-based line. */
long doc_character(const char *text, size_t len, int line, int byte_col);
/* Replaces the bytes between two LSP positions with `with`. */
void doc_replace(Document *d, long start_line, long start_char, long end_line, long end_char,
                 const char *with, size_t with_len);
void doc_set_text(Document *d, const char *text, size_t len);
/* file:///a/b%20c.tfm -> /a/b c.tfm; a URI of another scheme is kept as
 * it is (the front end then reports that no such file exists for imports). */
char *doc_uri_to_path(const char *uri);
char *doc_path_to_uri(const char *path);
void doc_free(Document *d);

#endif

/* One run of the front end over an open document, and what the language
 * server answers from it: diagnostics, hover texts, definitions, document
 * symbols and names to complete. Everything is copied out of the front
 * end's pool, so an Analysis outlives front_reset. Positions are the front
 * end's (1-based lines, 1-based byte columns, inclusive ends). */
#ifndef TFM_LSP_ANALYSIS_H
#define TFM_LSP_ANALYSIS_H
#include "sema.h"

typedef struct Range {
  int file;  /* index into Analysis.paths */
  int line, col, end_line, end_col;
} Range;

typedef struct DiagNote {
  Range at;  /* at.line == 0: no position */
  char *message;
} DiagNote;

typedef struct Diagnostic {
  Range at;
  char *message;
  DiagNote *notes;
  int nnotes;
} Diagnostic;

typedef struct Hover {
  Range at;
  char *text;     /* one line per distinct value seen there */
  int distinct;   /* how many lines */
  long seen;      /* evaluations that reached it */
} Hover;

typedef struct Definition {
  Range use, target;
} Definition;

/* LSP SymbolKind values used for the items of a file. */
typedef enum SymbolKind {
  SYM_MODULE = 2, SYM_NAMESPACE = 3, SYM_CLASS = 5, SYM_FIELD = 8, SYM_FUNCTION = 12,
  SYM_VARIABLE = 13, SYM_CONSTANT = 14, SYM_OBJECT = 19, SYM_STRUCT = 23
} SymbolKind;

typedef struct Symbol {
  char *name;
  char *detail;
  SymbolKind kind;
  Range range, selection;
  int parent; /* index of the enclosing symbol, or -1 */
} Symbol;

/* A name completion offers: kind is an LSP CompletionItemKind. */
typedef struct Completion {
  char *label;
  char *detail;
  int kind;
} Completion;

typedef struct Analysis {
  char **paths;  /* absolute paths of the files read; 0 is the document */
  int npaths;
  Diagnostic *diagnostics;
  int ndiagnostics;
  Hover *hovers;
  int nhovers;
  Definition *definitions;
  int ndefinitions;
  Symbol *symbols;   /* of the document only */
  int nsymbols;
  Completion *completions; /* fns and layers of the file and its imports, config keys */
  int ncompletions;
  double milliseconds; /* how long the front end took */
} Analysis;

/* What tfmc check's -D, --variant and -I would say, kept outside the
 * front end's pool (which each analysis resets). */
typedef struct CheckSettings {
  const char **defines; /* "NAME=VALUE" */
  int ndefines;
  const char **include_dirs;
  int ninclude_dirs;
  const char *variant;  /* or NULL */
} CheckSettings;

/* Checks `text` as the file at `path`, as tfmc check would with these
 * settings (and a file without a model taken as a library). */
Analysis *analysis_run(const CheckSettings *settings, const char *path, const char *text, size_t len);
void analysis_free(Analysis *a);
/* The innermost hover whose range holds the position in file `file`
 * (1-based line and byte column), or NULL. */
const Hover *analysis_hover_at(const Analysis *a, int file, int line, int col);
const Definition *analysis_definition_at(const Analysis *a, int file, int line, int col);
/* The index of `path` among a's files, or -1. */
int analysis_file(const Analysis *a, const char *path);

#endif

/* The JSON of the server's answers, from a document and its analysis:
 * diagnostics to publish, hover, definition, document symbols, completion. */
#ifndef TFM_LSP_ANSWERS_H
#define TFM_LSP_ANSWERS_H
#include "analysis.h"
#include "document.h"
#include "json_write.h"

/* The params of textDocument/publishDiagnostics. */
void answer_diagnostics(JsonBuf *b, const Document *d, const Analysis *a);
/* A Hover or null, for the position (0-based line, UTF-16 character) in
 * document d; `others` are the analyses of the other open documents,
 * which may have seen d's file (a std file a model imports). */
void answer_hover(JsonBuf *b, const Document *d, long line, long character, const Analysis *own,
                  const Analysis *const *others, int nothers);
void answer_definition(JsonBuf *b, const Document *d, long line, long character,
                       const Analysis *own, const Analysis *const *others, int nothers);
void answer_symbols(JsonBuf *b, const Document *d, const Analysis *a);
void answer_completion(JsonBuf *b, const Analysis *a);

#endif

/* tfmc lsp: a Language Server Protocol server over a pair of streams
 * (stdin and stdout), checking each open document with the front end as
 * it changes. */
#ifndef TFM_LSP_SERVER_H
#define TFM_LSP_SERVER_H
#include <stdio.h>

#include "analysis.h"

/* Serves until `exit` or the end of `in`. base holds the -D, --variant and
 * -I settings of the command line (its strings must outlive the call); the client's initializationOptions
 * ({"defines": ["d_model=64"], "variant": "big", "includeDirs": [...]})
 * add to them. Returns the exit status: 0 after shutdown then exit, 1
 * otherwise (as the protocol asks). */
int lsp_serve(FILE *in, FILE *out, const CheckSettings *base);

#endif

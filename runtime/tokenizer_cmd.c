/* tokenizer train|encode: a tokenizer from a corpus, and what a tokenizer
 * makes of a text (tokenizer.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "tokenizer.h"

/* train --vocab-size N --out tokenizer.json FILE...: byte-level BPE. */
static int tokenizer_train(const char *prog, const Cli *c) {
  if (c->num_paths < 2)
    return cli_usage_error(prog, "%s", "tokenizer train needs the corpus: FILE...");
  if (!c->out) return cli_usage_error(prog, "%s", "tokenizer train needs --out tokenizer.json");
  if (c->vocab_size < 257)
    return cli_usage_error(prog, "%s", "tokenizer train needs --vocab-size N, N > 256 (the 256 "
                                       "bytes come first)");
  const char *const *files = c->paths + 1;
  size_t count = c->num_paths - 1;
  if (tfm_tokenizer_train_bpe(files, count, (size_t)c->vocab_size, c->out)) return cli_fail(prog);
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load(c->out, &tok)) return cli_fail(prog);
  printf("trained a byte-level BPE tokenizer of %zu tokens on %zu file%s: %s\n",
         tfm_tokenizer_vocab_size(tok), count, count == 1 ? "" : "s", c->out);
  tfm_tokenizer_free(tok);
  return 0;
}

/* encode --tokenizer FILE --text T: each id with its token, then the
 * decoded text. */
static int tokenizer_encode(const char *prog, const Cli *c) {
  if (!c->tokenizer || !c->text)
    return cli_usage_error(prog, "%s", "tokenizer encode needs --tokenizer FILE --text T");
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load(c->tokenizer, &tok)) return cli_fail(prog);
  tfm_tokenizer_ids ids = {0};
  char *text = NULL;
  size_t size = 0;
  int status = tfm_tokenizer_encode(tok, c->text, strlen(c->text), &ids);
  if (!status) status = tfm_tokenizer_decode(tok, ids.ids, ids.count, &text, &size);
  if (!status) {
    printf("%s tokenizer, %zu tokens; %zu ids:\n", tfm_tokenizer_kind_name(tfm_tokenizer_kind_of(tok)),
           tfm_tokenizer_vocab_size(tok), ids.count);
    for (size_t i = 0; i < ids.count; i++) {
      size_t length = 0;
      const char *token = tfm_tokenizer_token(tok, ids.ids[i], &length);
      printf("  %" PRId32 "\t", ids.ids[i]);
      json_write_string(stdout, token ? token : "", token ? length : 0);
      printf("\n");
    }
    printf("decoded: ");
    json_write_string(stdout, text, size);
    printf("\n");
  }
  free(text);
  tfm_tokenizer_ids_free(&ids);
  tfm_tokenizer_free(tok);
  return status ? cli_fail(prog) : 0;
}

int cli_tokenizer(const char *prog, const Cli *c) {
  const char *what = c->num_paths ? c->paths[0] : "";
  if (!strcmp(what, "train")) return tokenizer_train(prog, c);
  if (!strcmp(what, "encode")) {
    if (c->num_paths > 1) return cli_usage_error(prog, "unexpected argument '%s'", c->paths[1]);
    return tokenizer_encode(prog, c);
  }
  return cli_usage_error(prog, "tokenizer: say train or encode, not '%s'", what);
}

/* attention --load CKPT --text T --html FILE: runs the model on one text and
 * writes its attention maps as a page (attention_page.h).
 *
 * The maps are outputs of the inspect graph (the forward graph plus the
 * probes, a layer's `output`s; the forward graph when the model has none)
 * shaped like attention weights: [batch, heads, queries, keys] or [batch,
 * queries, keys], each of queries and keys a sequence length of the model.
 * Row 0 of the batch holds the text; the other rows are padding. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_page.h"
#include "cli.h"

enum { MAX_MAPS = 256 };

/* How far from 1 a row of weights may sum for an output to count as
 * attention when --output does not name it. */
static const double ROW_SUM_TOLERANCE = 1e-3;

/* A sequence of the page whose tokens point into memory kept elsewhere. */
typedef struct Axis {
  size_t count;
  const char **tokens;
  size_t *lengths;
} Axis;

typedef struct Attention {
  const Cli *c;
  Task t;
  tfm_graph g;
  char *text;               /* a copy of --text, cut into words in place */
  Axis text_axis, source, target, decoder_input;
  int32_t *hyp;             /* translation: [rows, tgt_len] */
  size_t num_maps;
  tfm_attention_map maps[MAX_MAPS];
} Attention;

static int axis_alloc(Axis *a, size_t count) {
  a->count = 0;
  a->tokens = calloc(count ? count : 1, sizeof *a->tokens);
  a->lengths = calloc(count ? count : 1, sizeof *a->lengths);
  return a->tokens && a->lengths ? TFM_OK : tfm_fail("out of memory");
}

static void axis_push(Axis *a, const char *token, size_t length) {
  a->tokens[a->count] = token;
  a->lengths[a->count++] = length;
}

static void axis_free(Axis *a) {
  free(a->tokens);
  free(a->lengths);
}

static int32_t id_of(const Task *t, const char *token, size_t length, size_t *unknown) {
  int32_t id = tfm_vocab_find(&t->vocab, token, length);
  if (id >= 0) return id;
  ++*unknown;
  return TFM_UNK;
}

static void warn_unknown(size_t unknown, const char *what) {
  if (unknown) fprintf(stderr, "warning: %s of --text not in the vocabulary, read as <unk>: %zu\n",
                       what, unknown);
}

/* A character model reads the text's bytes, at most its window. */
static int fill_text(Attention *a) {
  Task *t = &a->t;
  size_t n = strlen(a->c->text), unknown = 0;
  if (!n) return tfm_fail("--text is empty");
  if (n > t->window)
    return tfm_fail("--text has %zu bytes but model %s reads at most %zu (its window, tokens' "
                    "second axis)", n, tfm_model.name, t->window);
  int32_t *tokens = tfm_graph_buffer(&a->g, "tokens", TFM_ROLE_INPUT, NULL);
  memset(tokens, 0, sizeof(int32_t) * t->rows * t->window);
  if (axis_alloc(&a->text_axis, n)) return TFM_FAILED;
  for (size_t i = 0; i < n; i++) {
    tokens[i] = id_of(t, a->c->text + i, 1, &unknown);
    axis_push(&a->text_axis, a->c->text + i, 1);
  }
  warn_unknown(unknown, "bytes");
  return TFM_OK;
}

/* An id of the logits past the vocabulary (an untrained model's) is <unk>. */
static const char *vocab_token(const Task *t, int32_t id, size_t *length) {
  if (id < 0 || (size_t)id >= t->vocab.count) id = TFM_UNK;
  *length = t->vocab.lengths[id];
  return t->vocab.tokens[id];
}

/* A translation model reads the source words; the target is the one given
 * after a tab, or the greedy translation. Queries of the decoder are shown
 * as the target words they predict, keys of its self-attention as the
 * decoder's input (<bos> and the target shifted). */
static int fill_pair(Attention *a, tfm_pool *pool) {
  Task *t = &a->t;
  size_t S = t->src_len, T = t->tgt_len, unknown = 0;
  int32_t *src = tfm_graph_buffer(&a->g, "src", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_in = tfm_graph_buffer(&a->g, "tgt_in", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_out = tfm_graph_buffer(&a->g, "tgt_out", TFM_ROLE_INPUT, NULL);
  memset(src, 0, sizeof(int32_t) * t->rows * S);
  char *tab = strchr(a->text, '\t');
  if (tab) *tab = '\0';
  a->hyp = calloc(t->rows * T, sizeof *a->hyp);
  if (!a->hyp || axis_alloc(&a->source, S) || axis_alloc(&a->target, T) ||
      axis_alloc(&a->decoder_input, T))
    return tfm_fail("out of memory");
  for (char *save = NULL, *w = strtok_r(a->text, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    if (a->source.count == S)
      return tfm_fail("the source of --text has more than %zu words, model %s's src_len", S,
                      tfm_model.name);
    src[a->source.count] = id_of(t, w, strlen(w), &unknown);
    axis_push(&a->source, w, strlen(w));
  }
  if (!a->source.count) return tfm_fail("the source of --text has no words");
  size_t length = 0;
  if (tab) {
    for (char *save = NULL, *w = strtok_r(tab + 1, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
      if (length + 1 >= T)
        return tfm_fail("the target of --text has more than %zu words (tgt_len %zu, <eos> "
                        "included)", T - 1, T);
      a->hyp[length++] = id_of(t, w, strlen(w), &unknown);
    }
    if (!length) return tfm_fail("the target of --text (after the tab) has no words");
    a->hyp[length++] = TFM_EOS;
  } else {
    double *logprob = calloc(t->rows, sizeof *logprob);
    double *row_lp = calloc((size_t)t->model_vocab, sizeof *row_lp);
    size_t *lengths = calloc(t->rows, sizeof *lengths);
    if (logprob && row_lp && lengths)
      cli_greedy_translate(t, &a->g, pool, a->hyp, logprob, lengths, row_lp);
    length = lengths ? lengths[0] : 0;
    free(logprob);
    free(row_lp);
    free(lengths);
    if (!length) return tfm_fail("out of memory");
  }
  warn_unknown(unknown, "words");
  /* Only row 0 is the text: the greedy decoding wrote every row. */
  memset(tgt_in, 0, sizeof(int32_t) * t->rows * T);
  if (tgt_out) memset(tgt_out, 0, sizeof(int32_t) * t->rows * T);
  tgt_in[0] = TFM_BOS;
  for (size_t i = 0; i < length; i++) {
    size_t n;
    const char *word = vocab_token(t, a->hyp[i], &n);
    axis_push(&a->target, word, n);
    word = vocab_token(t, i ? a->hyp[i - 1] : TFM_BOS, &n);
    axis_push(&a->decoder_input, word, n);
    if (i + 1 < T) tgt_in[i + 1] = a->hyp[i];
    if (tgt_out) tgt_out[i] = a->hyp[i];
  }
  char line[8192];
  tfm_vocab_decode(&t->vocab, a->hyp, length, " ", line, sizeof line, NULL);
  printf("target: %s\n", line);
  return TFM_OK;
}

/* The page's name for axis `dim` of map `name` (a query axis when `query`).
 * When the source and target lengths are equal, the shape cannot tell them
 * apart and the name decides: an encoder's maps are source on both axes, a
 * decoder's self-attention target on decoder input, and others (cross- or
 * RNN attention) target on source. */
static const char *axis_name(const Task *t, const char *name, int64_t dim, int query) {
  if (!t->translation) return "text";
  int source = t->src_len != t->tgt_len ? (size_t)dim == t->src_len
               : strstr(name, "encoder") ? 1
               : strstr(name, "self") ? 0 : !query;
  return source ? "source" : query ? "target" : "decoder input";
}

static const Axis *axis_named(const Attention *a, const char *name) {
  return !strcmp(name, "text") ? &a->text_axis : !strcmp(name, "source") ? &a->source
         : !strcmp(name, "target") ? &a->target : &a->decoder_input;
}

static int is_sequence_length(const Task *t, int64_t dim) {
  return t->translation ? (size_t)dim == t->src_len || (size_t)dim == t->tgt_len
                        : (size_t)dim == t->window;
}

/* [batch, (heads,) queries, keys], queries and keys sequence lengths. */
static int attention_shaped(const Task *t, const tfm_buffer_desc *b) {
  return b->dtype == TFM_F32 && (b->rank == 3 || b->rank == 4) && (size_t)b->shape[0] == t->rows &&
         is_sequence_length(t, b->shape[b->rank - 2]) && is_sequence_length(t, b->shape[b->rank - 1]);
}

static void list_outputs(const tfm_graph_desc *d, char *out, size_t size) {
  out[0] = '\0';
  for (int32_t i = 0; i < d->num_buffers; i++)
    if (d->buffers[i].role == TFM_ROLE_OUTPUT)
      snprintf(out + strlen(out), size - strlen(out), " %s", d->buffers[i].name);
}

static int add_map(Attention *a, const tfm_buffer_desc *b) {
  if (a->num_maps == MAX_MAPS) return tfm_fail("more than %d attention maps", MAX_MAPS);
  int64_t Q = b->shape[b->rank - 2], K = b->shape[b->rank - 1];
  tfm_attention_map *m = &a->maps[a->num_maps];
  m->name = b->name;
  m->queries = axis_name(&a->t, b->name, Q, 1);
  m->keys = axis_name(&a->t, b->name, K, 0);
  m->heads = b->rank == 4 ? (size_t)b->shape[1] : 1;
  m->head_stride = (size_t)(Q * K);
  m->row_stride = (size_t)K;
  a->num_maps++;
  return TFM_OK;
}

/* The --output names, each an attention-shaped output of the graph. */
static int choose_named(Attention *a, const tfm_graph_desc *d) {
  char names[4096], outputs[4096];
  snprintf(names, sizeof names, "%s", a->c->outputs);
  list_outputs(d, outputs, sizeof outputs);
  for (char *save = NULL, *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
    const tfm_buffer_desc *b = NULL;
    for (int32_t i = 0; i < d->num_buffers && !b; i++)
      if (d->buffers[i].role == TFM_ROLE_OUTPUT && !strcmp(d->buffers[i].name, n)) b = &d->buffers[i];
    if (!b)
      return tfm_fail("model %s has no output '%s' (its outputs and probes:%s)", tfm_model.name, n,
                      outputs);
    if (!attention_shaped(&a->t, b))
      return tfm_fail("output '%s' is not shaped like attention weights: it should be f32 [batch, "
                      "heads, queries, keys] or [batch, queries, keys], with batch %zu and "
                      "queries and keys sequence lengths of the model", n, a->t.rows);
    if (add_map(a, b)) return TFM_FAILED;
  }
  return TFM_OK;
}

/* Whether row 0's weights sum to 1 for every query of the text. */
static int rows_sum_to_one(const Attention *a, const tfm_attention_map *m) {
  const Axis *q = axis_named(a, m->queries);
  for (size_t h = 0; h < m->heads; h++)
    for (size_t i = 0; i < q->count; i++) {
      double sum = 0;
      const float *row = m->weights + h * m->head_stride + i * m->row_stride;
      for (size_t k = 0; k < m->row_stride; k++) sum += row[k];
      if (!(fabs(sum - 1) <= ROW_SUM_TOLERANCE)) return 0;
    }
  return 1;
}

/* --layer: a map's name, or a number L for the first map with ".L." in its
 * name (or starting "L."). */
static int choose_layer(const Attention *a, size_t *index) {
  const char *l = a->c->layer;
  *index = 0;
  if (!l) return TFM_OK;
  char dotted[64], head[64];
  snprintf(dotted, sizeof dotted, ".%s.", l);
  snprintf(head, sizeof head, "%s.", l);
  for (size_t i = 0; i < a->num_maps; i++)
    if (!strcmp(a->maps[i].name, l)) return *index = i, TFM_OK;
  for (size_t i = 0; l[0] >= '0' && l[0] <= '9' && i < a->num_maps; i++)
    if (strstr(a->maps[i].name, dotted) || !strncmp(a->maps[i].name, head, strlen(head)))
      return *index = i, TFM_OK;
  char names[4096] = "";
  for (size_t i = 0; i < a->num_maps; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), " %s", a->maps[i].name);
  return tfm_fail("--layer %s matches none of the attention maps:%s", l, names);
}

static int choose_head(const Attention *a, size_t map, long *head) {
  const char *h = a->c->head;
  *head = -1;
  if (!h || !strcmp(h, "mean")) return TFM_OK;
  char *end;
  long v = strtol(h, &end, 10);
  if (*end || !*h || v < 0 || (size_t)v >= a->maps[map].heads)
    return tfm_fail("--head %s: map %s has heads 0 to %zu (or 'mean')", h, a->maps[map].name,
                    a->maps[map].heads - 1);
  *head = v;
  return TFM_OK;
}

static int write_page(Attention *a) {
  size_t map;
  long head;
  if (choose_layer(a, &map) || choose_head(a, map, &head)) return TFM_FAILED;
  tfm_attention_page p = {.title = tfm_model.name, .maps = a->maps, .num_maps = a->num_maps,
                          .select_map = map, .select_head = head};
  char subtitle[4096];
  snprintf(subtitle, sizeof subtitle, "checkpoint %s · compiled from %s", a->c->load, tfm_model.source);
  p.subtitle = subtitle;
  const char *names[] = {"text", "source", "target", "decoder input"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const Axis *x = axis_named(a, names[i]);
    if (!x->count) continue;
    p.sequences[p.num_sequences++] =
        (tfm_page_sequence){names[i], x->count, x->tokens, x->lengths};
  }
  /* A causal model's last token attends to the whole text. */
  p.select_query = a->t.translation ? 0 : a->text_axis.count - 1;
  if (tfm_attention_page_write(&p, a->c->html)) return TFM_FAILED;
  printf("wrote %zu attention maps to %s:", a->num_maps, a->c->html);
  for (size_t i = 0; i < a->num_maps; i++) printf(" %s", a->maps[i].name);
  printf("\n");
  return TFM_OK;
}

static int run_attention(Attention *a, tfm_pool *pool) {
  const tfm_graph_desc *d = a->g.desc;
  if (a->c->outputs && choose_named(a, d)) return TFM_FAILED;
  for (int32_t i = 0; !a->c->outputs && i < d->num_buffers; i++)
    if (d->buffers[i].role == TFM_ROLE_OUTPUT && attention_shaped(&a->t, &d->buffers[i]) &&
        add_map(a, &d->buffers[i]))
      return TFM_FAILED;
  if ((a->t.translation ? fill_pair(a, pool) : fill_text(a))) return TFM_FAILED;
  tfm_graph_run(&a->g, pool);
  size_t kept = 0;
  for (size_t i = 0; i < a->num_maps; i++) {
    a->maps[i].weights = tfm_graph_buffer(&a->g, a->maps[i].name, TFM_ROLE_OUTPUT, NULL);
    /* Chosen by shape alone, an output must also be weights to be shown. */
    if (a->c->outputs || rows_sum_to_one(a, &a->maps[i])) a->maps[kept++] = a->maps[i];
  }
  a->num_maps = kept;
  if (!kept) {
    char outputs[4096];
    list_outputs(d, outputs, sizeof outputs);
    return tfm_fail("model %s has no output shaped like attention weights (f32 [batch, heads, "
                    "queries, keys] with rows summing to 1; its outputs:%s); declare one with "
                    "'output NAME = ...' in a layer (docs/language.md, Probes) or name one with "
                    "--output", tfm_model.name, outputs);
  }
  return write_page(a);
}

int cli_attention(const char *prog, const Cli *c, tfm_pool *pool) {
  if (!c->text) return cli_usage_error(prog, "%s", "attention needs --text TEXT");
  if (!c->html) return cli_usage_error(prog, "%s", "attention needs --html FILE");
  Attention *a = calloc(1, sizeof *a);
  if (!a) return tfm_fail("out of memory"), cli_fail(prog);
  a->c = c;
  a->t.cli = c;
  const tfm_graph_desc *d = tfm_model.inspect ? tfm_model.inspect : tfm_model.forward;
  int status = cli_open_trained(prog, c, &a->t, d, &a->g);
  if (!status) {
    a->text = strdup(c->text);
    status = (!a->text ? tfm_fail("out of memory") : run_attention(a, pool)) ? cli_fail(prog) : 0;
    tfm_graph_close(&a->g);
    tfm_vocab_free(&a->t.vocab);
  }
  axis_free(&a->text_axis);
  axis_free(&a->source);
  axis_free(&a->target);
  axis_free(&a->decoder_input);
  free(a->hyp);
  free(a->text);
  free(a);
  return status;
}

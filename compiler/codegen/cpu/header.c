/* Writes the C header of a model built as a library (see header.h). */
#include "header.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
/* The runtime's own types, only for the layout numbers the header checks:
 * the header redeclares tfm_graph so that it stands alone, and a program
 * compiled against a header that no longer matches must not build. */
#include "model.h"

/* The runtime's C API as an embedding program needs it. Types are declared
 * only when the runtime's headers were not included first; the functions
 * always are, so that with those headers the compiler checks the two agree. */
static const char RUNTIME_API[] =
    "/* --- the runtime's C API (runtime/tfmrt.h, model.h, train.h) --------------- */\n"
    "#ifndef TFMRT_H\n"
    "enum { TFM_OK = 0, TFM_FAILED = 1 };\n"
    "typedef struct tfm_pool tfm_pool;\n"
    "typedef struct tfm_meta tfm_meta; /* checkpoint metadata; pass NULL */\n"
    "typedef struct {\n"
    "  unsigned char *persistent;\n"
    "  unsigned char *scratch;\n"
    "  size_t persistent_bytes, scratch_bytes;\n"
    "} tfm_arena;\n"
    "#endif\n"
    "#ifndef TFM_MODEL_H\n"
    "typedef enum {\n"
    "  TFM_ROLE_INPUT = 0,\n"
    "  TFM_ROLE_PARAM = 1,\n"
    "  TFM_ROLE_STATE = 2,\n"
    "  TFM_ROLE_OUTPUT = 3\n"
    "} tfm_role;\n"
    "typedef struct tfm_buffer_desc tfm_buffer_desc;\n"
    "typedef struct tfm_graph_desc tfm_graph_desc;\n"
    "typedef struct tfm_model_info tfm_model_info;\n"
    "/* A graph instance: its arena and buffers. */\n"
    "typedef struct tfm_graph {\n"
    "  const tfm_graph_desc *desc;\n"
    "  tfm_arena arena;\n"
    "} tfm_graph;\n"
    "#ifndef __cplusplus\n"
    "_Static_assert(sizeof(tfm_arena) == %zu && sizeof(tfm_graph) == %zu &&\n"
    "                  offsetof(tfm_graph, arena) == %zu,\n"
    "              \"this header does not match the runtime it was generated with\");\n"
    "#endif\n"
    "#endif\n"
    "\n"
    "/* Every function that can fail returns TFM_OK (0) or the message in tfm_error(). */\n"
    "const char *tfm_error(void);\n"
    "/* threads == 0: $TFM_THREADS, else every CPU; a NULL pool runs on the caller. */\n"
    "int tfm_pool_create(tfm_pool **pool, size_t threads);\n"
    "void tfm_pool_destroy(tfm_pool *pool);\n"
    "int tfm_graph_open(tfm_graph *g, const tfm_graph_desc *desc);\n"
    "void tfm_graph_close(tfm_graph *g);\n"
    "/* The buffer with this name and role, or NULL (desc_out may be NULL).\n"
    " * A GPU build keeps params and states on the device: a param or state\n"
    " * buffer is current as of this call, so ask again after a run. */\n"
    "void *tfm_graph_buffer(tfm_graph *g, const char *name, tfm_role role,\n"
    "                       const tfm_buffer_desc **desc_out);\n"
    "/* Runs every kernel; then update writes the optimizer step into the params. */\n"
    "void tfm_graph_run(tfm_graph *g, tfm_pool *pool);\n"
    "void tfm_graph_update(tfm_graph *g);\n"
    "/* Checkpoints (safetensors): every param and optimizer state, by name. */\n"
    "int tfm_graph_save(const tfm_graph *g, const char *path, const tfm_meta *meta);\n"
    "int tfm_graph_load(tfm_graph *g, const char *path, tfm_meta *meta_out);\n"
    "/* Runs the model's init graph with `seed` and copies its values into g's params. */\n"
    "int tfm_initialise(tfm_graph *g, const tfm_model_info *model, uint64_t seed, tfm_pool *pool);\n"
    "\n";

static const char *const ROLE_WORD[] = {"input", "param", "state", "output"};
static const char *const ROLE_ENUM[] = {"TFM_ROLE_INPUT", "TFM_ROLE_PARAM", "TFM_ROLE_STATE",
                                        "TFM_ROLE_OUTPUT"};

/* bf16 is its 16 bits (the high half of an f32). */
static const char *c_type(GraphDtype storage) {
  return storage == GRAPH_F64    ? "double"
         : storage == GRAPH_I32  ? "int32_t"
         : storage == GRAPH_BF16 ? "uint16_t"
                                 : "float";
}

/* MODEL_GRAPH_NAME with every character that cannot be in a C name as '_',
 * upper-cased for macros. */
static void c_name(char *out, size_t size, const char *model, const char *graph, const char *name,
                   bool upper) {
  snprintf(out, size, "%s_%s_%s", model, graph, name);
  for (char *p = out; *p; p++) {
    if (!isalnum((unsigned char)*p)) *p = '_';
    if (upper) *p = (char)toupper((unsigned char)*p);
  }
}

static bool has_accessor(DescribeRole role) {
  return role == DESCRIBE_INPUT || role == DESCRIBE_OUTPUT;
}

/* Two names of a graph's accessors that come out as one C name. */
static bool find_clash(const HeaderModel *m, const HeaderGraph *hg, const DescribedBuffer *b, int n,
                       char *err, size_t err_size) {
  char a[512], c[512];
  for (int i = 0; i < n; i++) {
    if (!has_accessor(b[i].role)) continue;
    c_name(a, sizeof a, m->name, hg->name, b[i].name, false);
    for (int j = i + 1; j < n; j++) {
      if (!has_accessor(b[j].role)) continue;
      c_name(c, sizeof c, m->name, hg->name, b[j].name, false);
      if (!strcmp(a, c)) {
        snprintf(err, err_size, "header: %s %s and %s %s of graph %s both give the C name %s",
                 ROLE_WORD[b[i].role], b[i].name, ROLE_WORD[b[j].role], b[j].name, hg->name, a);
        return true;
      }
    }
  }
  return false;
}

static void write_graph(FILE *out, const HeaderModel *m, const HeaderGraph *hg,
                        const DescribedBuffer *b, int n) {
  const Graph *g = hg->plan->graph;
  fprintf(out, "/* --- graph %s: tfm_graph_open(&g, &%s_desc) --- */\n", hg->name, hg->prefix);
  fprintf(out, "extern const tfm_graph_desc %s_desc;\n/* Its buffers:\n", hg->prefix);
  for (int i = 0; i < n; i++) {
    const GraphNode *node = graph_node(g, b[i].node);
    char type[128];
    graph_format_type(type, sizeof type, kernel_storage_dtype(node->dtype), &node->shape);
    fprintf(out, " *   %-6s %-32s %s\n", ROLE_WORD[b[i].role], b[i].name, type);
  }
  fprintf(out, " */\n");
  for (int i = 0; i < n; i++) {
    if (!has_accessor(b[i].role)) continue;
    const GraphNode *node = graph_node(g, b[i].node);
    const char *type = c_type(kernel_storage_dtype(node->dtype));
    char fn[512], macro[512];
    c_name(fn, sizeof fn, m->name, hg->name, b[i].name, false);
    c_name(macro, sizeof macro, m->name, hg->name, b[i].name, true);
    fprintf(out, "#define %s_NUMEL %lld\n", macro, (long long)graph_shape_numel(&node->shape));
    fprintf(out, "static inline %s *%s(tfm_graph *g) {\n", type, fn);
    fprintf(out, "  return (%s *)tfm_graph_buffer(g, \"%s\", %s, NULL);\n}\n", type, b[i].name,
            ROLE_ENUM[b[i].role]);
  }
  fprintf(out, "\n");
}

bool header_write(FILE *out, const HeaderModel *m, char *err, size_t err_size) {
  DescribedBuffer **buffers = calloc((size_t)m->num_graphs + 1, sizeof *buffers);
  int *counts = calloc((size_t)m->num_graphs + 1, sizeof *counts);
  bool ok = buffers && counts;
  if (!ok) snprintf(err, err_size, "header: out of memory");
  for (int i = 0; ok && i < m->num_graphs; i++) {
    buffers[i] = describe_buffers(m->graphs[i].plan, &counts[i]);
    if (!buffers[i]) {
      snprintf(err, err_size, "header: out of memory");
      ok = false;
    }
    ok = ok && !find_clash(m, &m->graphs[i], buffers[i], counts[i], err, err_size);
  }
  if (ok) {
    char guard[512];
    c_name(guard, sizeof guard, "TFM", "MODEL", m->name, true);
    fprintf(out,
            "/* The C interface of model %s (%s), generated by tfmc; do not edit.\n"
            " * Link with the shared library built with it: the model's compiled graphs\n"
            " * and the tfm runtime. Open a graph below (tfm_graph_open), give it its\n"
            " * parameters (tfm_initialise or tfm_graph_load), write its inputs through\n"
            " * the accessors, tfm_graph_run, read its outputs; for the train graph,\n"
            " * tfm_graph_update then applies the optimizer step. */\n"
            "#ifndef %s_H\n#define %s_H\n\n"
            "#include <stddef.h>\n#include <stdint.h>\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            m->name, m->source, guard, guard);
    fprintf(out, RUNTIME_API, sizeof(tfm_arena), sizeof(tfm_graph), offsetof(tfm_graph, arena));
    fprintf(out, "/* --- model %s: pass &tfm_model to tfm_initialise --- */\n", m->name);
    fprintf(out, "extern const tfm_model_info tfm_model;\n\n");
    for (int i = 0; i < m->num_graphs; i++) write_graph(out, m, &m->graphs[i], buffers[i], counts[i]);
    fprintf(out, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    if (fflush(out) != 0 || ferror(out)) {
      snprintf(err, err_size, "header: writing failed");
      ok = false;
    }
  }
  for (int i = 0; buffers && i < m->num_graphs; i++) free(buffers[i]);
  free(buffers);
  free(counts);
  return ok;
}

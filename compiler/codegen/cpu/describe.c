/* The descriptions a compiled binary carries for the runtime: for each
 * graph a tfm_graph_desc (runtime/model.h) naming every input, param, state
 * and output with its dtype, shape, region and offset, and listing its
 * kernels (a label, FLOPs and bytes, for --profile), and one
 * tfm_model_info tying the graphs together. They are LLVM constants whose
 * struct layouts follow the C structs field for field (the data layout adds
 * the same padding a C compiler would). */
#include "describe.h"

#include <llvm-c/Core.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Emitter {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTypeRef i8p, i32, i64;
  int strings;
} Emitter;

static Emitter emitter(CpuModule *m) {
  Emitter e = {0};
  e.mod = cpu_module_llvm(m, &e.ctx);
  e.i8p = LLVMPointerType(LLVMInt8TypeInContext(e.ctx), 0);
  e.i32 = LLVMInt32TypeInContext(e.ctx);
  e.i64 = LLVMInt64TypeInContext(e.ctx);
  return e;
}

static LLVMValueRef string_ptr(Emitter *e, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext(e->ctx, s, (unsigned)strlen(s), 0);
  char name[64];
  snprintf(name, sizeof name, ".tfm.str.%d", e->strings++);
  LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return LLVMConstBitCast(g, e->i8p);
}

static LLVMValueRef constant_global(Emitter *e, LLVMValueRef init, const char *name, int exported) {
  LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, exported ? LLVMExternalLinkage : LLVMPrivateLinkage);
  return g;
}

/* runtime/model.h: tfm_buffer_desc */
static LLVMTypeRef buffer_type(Emitter *e) {
  LLVMTypeRef fields[] = {e->i8p, e->i32, e->i32, e->i32, e->i32, e->i64,
                          LLVMArrayType(e->i64, GRAPH_MAX_RANK), e->i32};
  return LLVMStructTypeInContext(e->ctx, fields, 8, 0);
}

static LLVMValueRef buffer_desc(Emitter *e, const KernelPlan *plan, GraphId node, const char *name,
                                DescribeRole role) {
  const GraphNode *n = graph_node(plan->graph, node);
  const KernelBuffer *b = kernel_plan_buffer(plan, node);
  LLVMValueRef dims[GRAPH_MAX_RANK];
  for (int i = 0; i < GRAPH_MAX_RANK; i++)
    dims[i] = LLVMConstInt(e->i64, i < n->shape.rank ? (unsigned long long)n->shape.dims[i] : 0, 0);
  LLVMValueRef fields[] = {
      string_ptr(e, name),
      LLVMConstInt(e->i32, (unsigned long long)role, 0),
      LLVMConstInt(e->i32, (unsigned long long)kernel_storage_dtype(n->dtype), 0),
      LLVMConstInt(e->i32, b->region == KERNEL_PERSISTENT ? 0 : 1, 0),
      LLVMConstInt(e->i32, (unsigned long long)n->shape.rank, 0),
      LLVMConstInt(e->i64, (unsigned long long)b->offset, 0),
      LLVMConstArray(e->i64, dims, GRAPH_MAX_RANK),
      /* an output's value is final once the kernel that writes its buffer ran */
      LLVMConstInt(e->i32, (unsigned long long)(role == DESCRIBE_OUTPUT ? b->first_kernel : -1), 1)};
  return LLVMConstStructInContext(e->ctx, fields, 8, 0);
}

/* runtime/model.h: tfm_graph_desc */
static LLVMTypeRef graph_type(Emitter *e) {
  LLVMTypeRef fields[] = {e->i8p, e->i64, e->i64, e->i32, e->i8p, e->i8p, e->i8p, e->i32, e->i8p};
  return LLVMStructTypeInContext(e->ctx, fields, 9, 0);
}

/* runtime/model.h: tfm_kernel_desc */
static LLVMTypeRef kernel_type(Emitter *e) {
  LLVMTypeRef fields[] = {e->i8p, e->i64, e->i64};
  return LLVMStructTypeInContext(e->ctx, fields, 3, 0);
}

/* Short enough for one profile row: the kind, the ops it writes (the root,
 * then its other outputs, joined by +) and the root's type, and how many
 * ops were fused into it (`tfmc emit kernels` lists them). */
static LLVMValueRef kernel_desc(Emitter *e, const KernelPlan *plan, int ki) {
  const Kernel *k = &plan->kernels[ki];
  const GraphNode *root = graph_node(plan->graph, k->root);
  char type[160], label[256];
  graph_format_type(type, sizeof type, root->dtype, &root->shape);
  GraphId out[3];
  int count = kernel_outputs(k, out), used = 0;
  char ops[128] = "";
  for (int o = 0; o < count; o++)
    used += snprintf(ops + used, sizeof ops - (size_t)used, "%s%s", o ? "+" : "",
                     graph_op_name(graph_node(plan->graph, out[o])->op));
  snprintf(label, sizeof label, "%s %s %s (%d op%s)", kernel_kind_name(k->kind), ops, type,
           k->num_nodes, k->num_nodes == 1 ? "" : "s");
  LLVMValueRef fields[] = {string_ptr(e, label),
                           LLVMConstInt(e->i64, (unsigned long long)kernel_flops(plan, ki), 0),
                           LLVMConstInt(e->i64, (unsigned long long)kernel_bytes(plan, ki), 0)};
  return LLVMConstStructInContext(e->ctx, fields, 3, 0);
}

static LLVMValueRef kernel_table(Emitter *e, const KernelPlan *plan, const char *prefix) {
  LLVMValueRef *descs = calloc((size_t)plan->num_kernels + 1, sizeof *descs);
  if (!descs) return NULL;
  for (int i = 0; i < plan->num_kernels; i++) descs[i] = kernel_desc(e, plan, i);
  char sym[256];
  snprintf(sym, sizeof sym, "%s_kernels", prefix);
  LLVMValueRef table = constant_global(
      e, LLVMConstArray(kernel_type(e), descs, (unsigned)plan->num_kernels), sym, 0);
  free(descs);
  return table;
}

DescribedBuffer *describe_buffers(const KernelPlan *plan, int *count) {
  const Graph *g = plan->graph;
  int cap = graph_num_inputs(g) + graph_num_params(g) + graph_num_states(g) + graph_num_outputs(g);
  DescribedBuffer *out = calloc((size_t)cap + 1, sizeof *out);
  if (!out) return NULL;
  int n = 0;
  struct { int (*count)(const Graph *); GraphId (*at)(const Graph *, int); DescribeRole role; } leaves[] = {
      {graph_num_inputs, graph_input_at, DESCRIBE_INPUT},
      {graph_num_params, graph_param_at, DESCRIBE_PARAM},
      {graph_num_states, graph_state_at, DESCRIBE_STATE}};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < leaves[k].count(g); i++) {
      GraphId id = leaves[k].at(g, i);
      /* A leaf the graph never reads has no buffer; the runtime skips it. */
      if (kernel_plan_buffer(plan, id))
        out[n++] = (DescribedBuffer){graph_node(g, id)->attrs.name, leaves[k].role, id};
    }
  for (int i = 0; i < graph_num_outputs(g); i++) {
    GraphOutput o = graph_output_at(g, i);
    if (kernel_plan_buffer(plan, o.node)) out[n++] = (DescribedBuffer){o.name, DESCRIBE_OUTPUT, o.node};
  }
  *count = n;
  return out;
}

bool describe_graph(CpuModule *module, const KernelPlan *plan, const char *prefix,
                    const char *graph_name, char *err, size_t err_size) {
  Emitter e = emitter(module);
  int n = 0;
  DescribedBuffer *buffers = describe_buffers(plan, &n);
  LLVMValueRef *descs = calloc((size_t)n + 1, sizeof *descs);
  if (!buffers || !descs) {
    free(buffers);
    free(descs);
    snprintf(err, err_size, "describe: out of memory");
    return false;
  }
  for (int i = 0; i < n; i++)
    descs[i] = buffer_desc(&e, plan, buffers[i].node, buffers[i].name, buffers[i].role);
  free(buffers);
  char sym[256];
  snprintf(sym, sizeof sym, "%s_buffers", prefix);
  LLVMValueRef table = constant_global(&e, LLVMConstArray(buffer_type(&e), descs, (unsigned)n), sym, 0);
  free(descs);
  char run[256], update[256];
  snprintf(run, sizeof run, "%s_run", prefix);
  snprintf(update, sizeof update, "%s_update", prefix);
  LLVMValueRef run_fn = LLVMGetNamedFunction(e.mod, run), update_fn = LLVMGetNamedFunction(e.mod, update);
  if (!run_fn || !update_fn) {
    snprintf(err, err_size, "describe: %s has no %s or %s", graph_name, run, update);
    return false;
  }
  LLVMValueRef kernels = kernel_table(&e, plan, prefix);
  if (!kernels) {
    snprintf(err, err_size, "describe: out of memory");
    return false;
  }
  LLVMValueRef fields[] = {string_ptr(&e, graph_name),
                           LLVMConstInt(e.i64, (unsigned long long)plan->persistent_bytes, 0),
                           LLVMConstInt(e.i64, (unsigned long long)plan->scratch_bytes, 0),
                           LLVMConstInt(e.i32, (unsigned long long)n, 0),
                           LLVMConstBitCast(table, e.i8p),
                           LLVMConstBitCast(run_fn, e.i8p),
                           LLVMConstBitCast(update_fn, e.i8p),
                           LLVMConstInt(e.i32, (unsigned long long)plan->num_kernels, 0),
                           LLVMConstBitCast(kernels, e.i8p)};
  snprintf(sym, sizeof sym, "%s_desc", prefix);
  constant_global(&e, LLVMConstStructInContext(e.ctx, fields, 9, 0), sym, 1);
  return true;
}

static LLVMValueRef string_table(Emitter *e, const char *const *strings, int n, const char *name) {
  LLVMValueRef *ptrs = calloc((size_t)n + 1, sizeof *ptrs);
  for (int i = 0; i < n; i++) ptrs[i] = string_ptr(e, strings[i]);
  LLVMValueRef g = constant_global(e, LLVMConstArray(e->i8p, ptrs, (unsigned)n), name, 0);
  free(ptrs);
  return LLVMConstBitCast(g, e->i8p);
}

/* The tfm_graph_desc of another object, by its symbol, or a null pointer. */
static LLVMValueRef graph_ref(Emitter *e, const char *prefix) {
  if (!prefix) return LLVMConstNull(e->i8p);
  char sym[256];
  snprintf(sym, sizeof sym, "%s_desc", prefix);
  LLVMValueRef g = LLVMGetNamedGlobal(e->mod, sym);
  if (!g) g = LLVMAddGlobal(e->mod, graph_type(e), sym); /* defined in another object */
  return LLVMConstBitCast(g, e->i8p);
}

/* A table of pointers to other objects' tfm_graph_desc (NULL when n is 0). */
static LLVMValueRef graph_table(Emitter *e, const char *const *prefixes, int n) {
  if (!n) return LLVMConstNull(e->i8p);
  LLVMValueRef *ptrs = calloc((size_t)n, sizeof *ptrs);
  for (int i = 0; i < n; i++) ptrs[i] = graph_ref(e, prefixes[i]);
  LLVMValueRef g = constant_global(e, LLVMConstArray(e->i8p, ptrs, (unsigned)n),
                                   ".tfm.graph_table", 0);
  free(ptrs);
  return LLVMConstBitCast(g, e->i8p);
}

/* The tfm_pretrained_desc table (NULL without pretrained blocks). */
static LLVMValueRef pretrained_table(Emitter *e, const ModelDescription *d) {
  if (!d->num_pretrained) return LLVMConstNull(e->i8p);
  LLVMTypeRef members[] = {e->i8p, e->i8p, e->i32, e->i8p};
  LLVMTypeRef type = LLVMStructTypeInContext(e->ctx, members, 4, 0);
  LLVMValueRef *rows = calloc((size_t)d->num_pretrained, sizeof *rows);
  for (int i = 0; i < d->num_pretrained; i++) {
    char name[64];
    snprintf(name, sizeof name, ".tfm.pretrained_ignored.%d", i);
    LLVMValueRef fields[] = {string_ptr(e, d->pretrained_names[i]),
                             graph_ref(e, d->pretrained_prefixes[i]),
                             LLVMConstInt(e->i32, (unsigned long long)d->num_ignored[i], 0),
                             string_table(e, d->ignored[i], d->num_ignored[i], name)};
    rows[i] = LLVMConstNamedStruct(type, fields, 4);
  }
  LLVMValueRef table = constant_global(e, LLVMConstArray(type, rows, (unsigned)d->num_pretrained),
                                       ".tfm.pretrained", 0);
  free(rows);
  return LLVMConstBitCast(table, e->i8p);
}

bool describe_model(CpuModule *module, const ModelDescription *d) {
  Emitter e = emitter(module);
  LLVMValueRef fields[] = {string_ptr(&e, d->name),
                           string_ptr(&e, d->source),
                           LLVMConstInt(e.i32, (unsigned long long)d->num_config, 0),
                           string_table(&e, d->config_keys, d->num_config, ".tfm.config_keys"),
                           string_table(&e, d->config_values, d->num_config, ".tfm.config_values"),
                           graph_ref(&e, d->init_prefix),
                           graph_ref(&e, d->train_prefix),
                           graph_ref(&e, d->forward_prefix),
                           graph_ref(&e, d->inspect_prefix),
                           graph_ref(&e, d->train_grad_prefix),
                           graph_ref(&e, d->train_apply_prefix),
                           LLVMConstInt(e.i32, (unsigned long long)d->cuda, 0),
                           LLVMConstInt(e.i32, (unsigned long long)d->num_pretrained, 0),
                           pretrained_table(&e, d),
                           graph_ref(&e, d->train_norm_prefix),
                           LLVMConstInt(e.i32, (unsigned long long)d->num_train_apply_param, 0),
                           graph_table(&e, d->train_apply_param_prefixes,
                                       d->num_train_apply_param),
                           graph_ref(&e, d->decode_prefix),
                           LLVMConstInt(e.i32, (unsigned long long)d->cpu_dispatch, 0)};
  constant_global(&e, LLVMConstStructInContext(e.ctx, fields, 19, 0), "tfm_model", 1);
  return true;
}

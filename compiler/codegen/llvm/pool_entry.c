/* The entry points: P_run calls the kernels in plan order, each over its
 * range through tfm_kernel_for (tfm_parallel_for, timed under --profile);
 * P_update applies the updates. */
#include <stdio.h>

#include "gen.h"

static LLVMValueRef declare_kernel_for(Gen *gen) {
  /* int tfm_kernel_for(tfm_pool *, size_t n, tfm_range_fn, void *ctx, int32_t kernel) */
  LLVMTypeRef params[5] = {gen->ptr, gen->i64, LLVMPointerType(gen->range_fn, 0), gen->ptr,
                           gen->i32};
  LLVMTypeRef type = LLVMFunctionType(gen->i32, params, 5, false);
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, "tfm_kernel_for");
  return fn ? fn : LLVMAddFunction(gen->module, "tfm_kernel_for", type);
}

static LLVMValueRef buffer_address(Gen *gen, LLVMValueRef persistent, LLVMValueRef scratch,
                                   int buffer) {
  const KernelBuffer *b = &gen->plan->buffers[buffer];
  LLVMValueRef base = b->region == KERNEL_PERSISTENT ? persistent : scratch;
  return gen_element(gen, gen->i8, base, gen_i64(gen, b->offset));
}

LLVMValueRef gen_add_entry(Gen *gen, const char *suffix, int num_params) {
  char name[160];
  snprintf(name, sizeof name, "%s_%s", gen->prefix, suffix);
  LLVMTypeRef params[3] = {gen->ptr, gen->ptr, gen->ptr};
  LLVMValueRef fn = LLVMAddFunction(
      gen->module, name, LLVMFunctionType(gen->void_type, params, (unsigned)num_params, false));
  LLVMPositionBuilderAtEnd(gen->builder, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  return fn;
}

static void emit_run(Gen *gen) {
  const KernelPlan *plan = gen->plan;
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef fn = gen_add_entry(gen, "run", 3);
  /* Nothing to optimise in a list of calls, and at O3 the SLP vectorizer
   * spent 70% of the base Transformer's build on this one function (11.5 of
   * 16.2 s in `opt -O3 -time-passes`), trying to pack its argument stores. */
  const char *attributes[2] = {"noinline", "optnone"};
  gen_add_attributes(gen, fn, attributes, 2);
  LLVMValueRef persistent = LLVMGetParam(fn, 0), scratch = LLVMGetParam(fn, 1);
  LLVMValueRef pool = LLVMGetParam(fn, 2);
  LLVMValueRef kernel_for = declare_kernel_for(gen);
  LLVMTypeRef kf_type = LLVMGlobalGetValueType(kernel_for);
  int most_args = 1;
  for (int i = 0; i < plan->num_kernels; i++)
    if (plan->kernels[i].num_args > most_args)
      most_args = plan->kernels[i].num_args;
  /* One argument array serves every kernel: each call returns before the
   * next kernel fills it. */
  LLVMValueRef slots = LLVMBuildArrayAlloca(b, gen->ptr, gen_i64(gen, most_args), "args");
  LLVMValueRef ctx = LLVMBuildBitCast(b, slots, gen->ptr, "");
  /* Straight-line code, one tfm_kernel_for per kernel (a NULL pool runs
   * it on the caller): a branch per kernel made LLVM's jump threading
   * quadratic in the number of kernels (minutes for the base Transformer). */
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    const Kernel *k = &plan->kernels[ki];
    for (int i = 0; i < k->num_args; i++)
      LLVMBuildStore(b, buffer_address(gen, persistent, scratch, k->args[i]),
                     gen_element(gen, gen->ptr, slots, gen_i64(gen, i)));
    /* The kernel's index, for --profile: its entry in PREFIX_kernels. */
    int64_t items = gen->target->range_items(gen, k);
    LLVMValueRef call[5] = {pool, gen_i64(gen, items), gen->functions[k->function], ctx,
                            LLVMConstInt(gen->i32, (unsigned long long)ki, false)};
    LLVMBuildCall2(b, kf_type, kernel_for, call, 5, "");
  }
  LLVMBuildRetVoid(b);
}

/* memmove: a value may share its buffer with the target (p' = p). */
static void emit_update(Gen *gen) {
  const KernelPlan *plan = gen->plan;
  const Graph *g = gen->graph;
  LLVMValueRef fn = gen_add_entry(gen, "update", 2);
  LLVMValueRef persistent = LLVMGetParam(fn, 0), scratch = LLVMGetParam(fn, 1);
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    int to = plan->buffer_of[u.target], from = plan->buffer_of[u.value];
    if (to == from)
      continue;
    LLVMTypeRef types[3] = {gen->ptr, gen->ptr, gen->i64};
    LLVMValueRef args[4] = {buffer_address(gen, persistent, scratch, to),
                            buffer_address(gen, persistent, scratch, from),
                            gen_i64(gen, plan->buffers[to].bytes), LLVMConstInt(gen->i1, 0, false)};
    gen_intrinsic(gen, "llvm.memmove", types, 3, args, 4);
  }
  LLVMBuildRetVoid(gen->builder);
}

void gen_emit_size(Gen *gen, const char *suffix, int64_t bytes) {
  char name[160];
  snprintf(name, sizeof name, "%s_%s", gen->prefix, suffix);
  LLVMValueRef global = LLVMAddGlobal(gen->module, gen->i64, name);
  LLVMSetInitializer(global, gen_i64(gen, bytes));
  LLVMSetGlobalConstant(global, true);
}

void emit_pool_entry(Gen *gen) {
  emit_run(gen);
  emit_update(gen);
  gen_emit_size(gen, "persistent_bytes", gen->plan->persistent_bytes);
  gen_emit_size(gen, "scratch_bytes", gen->plan->scratch_bytes);
}

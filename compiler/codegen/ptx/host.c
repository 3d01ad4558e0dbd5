/* The host module of a CUDA build (ptx_host_target): the graph's PTX and
 * launch list as a tfm_gpu_program (runtime/gpu.h, field for field), P_run
 * and P_update calling tfm_gpu_run and tfm_gpu_update on it, and the
 * region sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "ptx.h"

static LLVMValueRef private_global(Gen *gen, LLVMValueRef init, const char *name) {
  LLVMValueRef g = LLVMAddGlobal(gen->module, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, true);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return LLVMConstBitCast(g, gen->ptr);
}

static LLVMValueRef text_global(Gen *gen, const char *text, const char *name) {
  return private_global(
      gen, LLVMConstStringInContext(gen->context, text, (unsigned)strlen(text), false), name);
}

static LLVMValueRef i64_array(Gen *gen, const int64_t *values, int count, const char *name) {
  LLVMValueRef *v = malloc(sizeof *v * (size_t)(count + 1));
  if (!v)
    abort(); /* out of memory while building LLVM IR */
  for (int i = 0; i < count; i++)
    v[i] = gen_i64(gen, values[i]);
  LLVMValueRef array = private_global(gen, LLVMConstArray(gen->i64, v, (unsigned)count), name);
  free(v);
  return array;
}

/* The runtime's tfm_region of a buffer. */
static int64_t region_of(const KernelBuffer *b) { return b->region == KERNEL_PERSISTENT ? 0 : 1; }

/* {region, offset, bytes} of node `id`'s buffer at out[3 * n]. */
static int add_range(const KernelPlan *plan, GraphId id, int64_t *out, int n) {
  const KernelBuffer *b = &plan->buffers[plan->buffer_of[id]];
  out[3 * n] = region_of(b);
  out[3 * n + 1] = b->offset;
  out[3 * n + 2] = b->bytes;
  return n + 1;
}

static LLVMValueRef emit_program(Gen *gen, const PtxHost *host) {
  const KernelPlan *plan = gen->plan;
  const Graph *g = gen->graph;
  int num_args = 0, num_inputs = 0, num_outputs = 0, num_copies = 0;
  for (int k = 0; k < plan->num_kernels; k++)
    num_args += plan->kernels[k].num_args;
  int64_t *regions = calloc((size_t)num_args + 1, sizeof(int64_t));
  int64_t *offsets = calloc((size_t)num_args + 1, sizeof(int64_t));
  int64_t *inputs = calloc(3 * (size_t)graph_num_inputs(g) + 1, sizeof(int64_t));
  int64_t *outputs = calloc(3 * (size_t)graph_num_outputs(g) + 1, sizeof(int64_t));
  int64_t *copies = calloc(4 * (size_t)graph_num_updates(g) + 1, sizeof(int64_t));
  LLVMValueRef *launches = calloc((size_t)plan->num_kernels + 1, sizeof(LLVMValueRef));
  if (!regions || !offsets || !inputs || !outputs || !copies || !launches)
    abort();
  LLVMTypeRef fields[15] = {gen->ptr, gen->i64, gen->i64, gen->i64, gen->ptr};
  LLVMTypeRef launch_type = LLVMStructTypeInContext(gen->context, fields, 5, false);
  int arg = 0;
  for (int k = 0; k < plan->num_kernels; k++) {
    const Kernel *kernel = &plan->kernels[k];
    char entry[160];
    ptx_entry_name(gen->prefix, kernel->function, entry, sizeof entry);
    int64_t desc[PTX_GEMM_FIELDS];
    bool cublas = host->cublas && ptx_dot_on_cublas(plan, k, desc);
    LLVMValueRef values[5] = {
        cublas ? LLVMConstNull(gen->ptr) : text_global(gen, entry, "entry"),
        gen_i64(gen, ptx_work_items(plan, k)), gen_i64(gen, kernel->num_args),
        gen_i64(gen, arg),
        cublas ? i64_array(gen, desc, PTX_GEMM_FIELDS, "gemm") : LLVMConstNull(gen->ptr)};
    launches[k] = LLVMConstNamedStruct(launch_type, values, 5);
    for (int i = 0; i < kernel->num_args; i++, arg++) {
      const KernelBuffer *b = &plan->buffers[kernel->args[i]];
      regions[arg] = region_of(b);
      offsets[arg] = b->offset;
    }
  }
  for (int i = 0; i < graph_num_inputs(g); i++)
    num_inputs = add_range(plan, graph_input_at(g, i), inputs, num_inputs);
  for (int i = 0; i < graph_num_outputs(g); i++)
    num_outputs = add_range(plan, graph_output_at(g, i).node, outputs, num_outputs);
  /* The update as the CPU's P_update does it (llvm/pool_entry.c), on the device. */
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    int to = plan->buffer_of[u.target], from = plan->buffer_of[u.value];
    if (to == from)
      continue;
    const KernelBuffer *value = &plan->buffers[from];
    int64_t *c = &copies[4 * num_copies++];
    c[0] = plan->buffers[to].offset;
    c[1] = region_of(value);
    c[2] = value->offset;
    c[3] = plan->buffers[to].bytes;
  }
  LLVMValueRef launch_array = private_global(
      gen, LLVMConstArray(launch_type, launches, (unsigned)plan->num_kernels), "launches");
  char name[160];
  snprintf(name, sizeof name, "%s_gpu_state", gen->prefix);
  LLVMValueRef state = LLVMAddGlobal(gen->module, gen->ptr, name);
  LLVMSetInitializer(state, LLVMConstNull(gen->ptr));
  LLVMSetLinkage(state, LLVMInternalLinkage);
  LLVMValueRef values[15] = {
      text_global(gen, host->ptx, "ptx"),
      gen_i64(gen, plan->persistent_bytes),
      gen_i64(gen, plan->scratch_bytes),
      gen_i64(gen, PTX_BLOCK_THREADS),
      gen_i64(gen, plan->num_kernels),
      launch_array,
      i64_array(gen, regions, num_args, "arg_region"),
      i64_array(gen, offsets, num_args, "arg_offset"),
      gen_i64(gen, num_inputs),
      i64_array(gen, inputs, 3 * num_inputs, "inputs"),
      gen_i64(gen, num_outputs),
      i64_array(gen, outputs, 3 * num_outputs, "outputs"),
      gen_i64(gen, num_copies),
      i64_array(gen, copies, 4 * num_copies, "copies"),
      LLVMConstBitCast(state, gen->ptr),
  };
  for (int i = 0; i < 15; i++)
    fields[i] = LLVMTypeOf(values[i]);
  LLVMTypeRef program_type = LLVMStructTypeInContext(gen->context, fields, 15, false);
  free(regions);
  free(offsets);
  free(inputs);
  free(outputs);
  free(copies);
  free(launches);
  snprintf(name, sizeof name, "%s_gpu_program", gen->prefix);
  LLVMValueRef program = LLVMAddGlobal(gen->module, program_type, name);
  LLVMSetInitializer(program, LLVMConstNamedStruct(program_type, values, 15));
  LLVMSetGlobalConstant(program, true);
  return LLVMConstBitCast(program, gen->ptr);
}

/* PREFIX_NAME(persistent, scratch[, pool]) calling tfm_gpu_NAME(program, persistent, scratch). */
static void emit_host_call(Gen *gen, LLVMValueRef program, const char *name, int params) {
  LLVMValueRef fn = gen_add_entry(gen, name, params);
  char callee[64];
  snprintf(callee, sizeof callee, "tfm_gpu_%s", name);
  LLVMTypeRef types[3] = {gen->ptr, gen->ptr, gen->ptr};
  LLVMValueRef args[3] = {program, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1)};
  gen_libcall(gen, callee, gen->void_type, types, args, 3);
  LLVMBuildRetVoid(gen->builder);
}

static void emit_entry(Gen *gen) {
  LLVMValueRef program = emit_program(gen, gen->target->data);
  emit_host_call(gen, program, "run", 3);
  emit_host_call(gen, program, "update", 2);
  gen_emit_size(gen, "persistent_bytes", gen->plan->persistent_bytes);
  gen_emit_size(gen, "scratch_bytes", gen->plan->scratch_bytes);
}

Target ptx_host_target(const PtxHost *host) {
  return (Target){.name = "cuda host", .emit_entry = emit_entry, .data = host};
}

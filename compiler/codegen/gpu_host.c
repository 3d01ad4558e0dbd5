/* The host module of a CUDA build: the graph's PTX and launch list as a
 * tfm_gpu_program (runtime/gpu.h, field for field), P_run calling
 * tfm_gpu_run on it, and the CPU backend's P_update and region sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "ptx.h"

static LLVMValueRef private_global(CpuGen *gen, LLVMValueRef init, const char *name) {
  LLVMValueRef g = LLVMAddGlobal(gen->module, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, true);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return LLVMConstBitCast(g, gen->ptr);
}

static LLVMValueRef text_global(CpuGen *gen, const char *text, const char *name) {
  return private_global(
      gen, LLVMConstStringInContext(gen->context, text, (unsigned)strlen(text), false), name);
}

static LLVMValueRef i64_array(CpuGen *gen, const int64_t *values, int count, const char *name) {
  LLVMValueRef *v = malloc(sizeof *v * (size_t)(count + 1));
  if (!v)
    abort(); /* out of memory while building LLVM IR */
  for (int i = 0; i < count; i++)
    v[i] = cpu_i64(gen, values[i]);
  LLVMValueRef array = private_global(gen, LLVMConstArray(gen->i64, v, (unsigned)count), name);
  free(v);
  return array;
}

static LLVMValueRef emit_program(CpuGen *gen, const char *ptx) {
  const KernelPlan *plan = gen->plan;
  int num_args = 0, num_downloads = 0;
  for (int k = 0; k < plan->num_kernels; k++)
    num_args += plan->kernels[k].num_args;
  int64_t *regions = calloc((size_t)num_args + 1, sizeof(int64_t));
  int64_t *offsets = calloc((size_t)num_args + 1, sizeof(int64_t));
  int64_t *down_offsets = calloc((size_t)graph_num_updates(gen->graph) + 1, sizeof(int64_t));
  int64_t *down_bytes = calloc((size_t)graph_num_updates(gen->graph) + 1, sizeof(int64_t));
  LLVMValueRef *launches = calloc((size_t)plan->num_kernels + 1, sizeof(LLVMValueRef));
  if (!regions || !offsets || !down_offsets || !down_bytes || !launches)
    abort();
  LLVMTypeRef fields[12] = {gen->ptr, gen->i64, gen->i64, gen->i64, gen->ptr};
  LLVMTypeRef launch_type = LLVMStructTypeInContext(gen->context, fields, 5, false);
  int arg = 0;
  for (int k = 0; k < plan->num_kernels; k++) {
    const Kernel *kernel = &plan->kernels[k];
    char entry[160];
    ptx_entry_name(gen->prefix, kernel->function, entry, sizeof entry);
    int64_t desc[PTX_GEMM_FIELDS];
    bool cublas = gen->gpu_cublas && ptx_dot_on_cublas(plan, k, desc);
    LLVMValueRef values[5] = {
        cublas ? LLVMConstNull(gen->ptr) : text_global(gen, entry, "entry"),
        cpu_i64(gen, ptx_work_items(plan, k)), cpu_i64(gen, kernel->num_args),
        cpu_i64(gen, arg),
        cublas ? i64_array(gen, desc, PTX_GEMM_FIELDS, "gemm") : LLVMConstNull(gen->ptr)};
    launches[k] = LLVMConstNamedStruct(launch_type, values, 5);
    for (int i = 0; i < kernel->num_args; i++, arg++) {
      const KernelBuffer *b = &plan->buffers[kernel->args[i]];
      regions[arg] = b->region == KERNEL_PERSISTENT ? 0 : 1; /* tfm_region */
      offsets[arg] = b->offset;
    }
  }
  for (int i = 0; i < graph_num_updates(gen->graph); i++) {
    GraphUpdate u = graph_update_at(gen->graph, i);
    const KernelBuffer *b = &plan->buffers[plan->buffer_of[u.value]];
    if (plan->buffer_of[u.value] != plan->buffer_of[u.target] && b->region == KERNEL_SCRATCH) {
      down_offsets[num_downloads] = b->offset;
      down_bytes[num_downloads++] = b->bytes;
    }
  }
  LLVMValueRef launch_array = private_global(
      gen, LLVMConstArray(launch_type, launches, (unsigned)plan->num_kernels), "launches");
  char name[160];
  snprintf(name, sizeof name, "%s_gpu_state", gen->prefix);
  LLVMValueRef state = LLVMAddGlobal(gen->module, gen->ptr, name);
  LLVMSetInitializer(state, LLVMConstNull(gen->ptr));
  LLVMSetLinkage(state, LLVMInternalLinkage);
  for (int i = 0; i < 12; i++)
    fields[i] = (i == 0 || i == 5 || i == 6 || i == 7 || i >= 9) ? gen->ptr : gen->i64;
  LLVMTypeRef program_type = LLVMStructTypeInContext(gen->context, fields, 12, false);
  LLVMValueRef values[12] = {
      text_global(gen, ptx, "ptx"),
      cpu_i64(gen, plan->persistent_bytes),
      cpu_i64(gen, plan->scratch_bytes),
      cpu_i64(gen, PTX_BLOCK_THREADS),
      cpu_i64(gen, plan->num_kernels),
      launch_array,
      i64_array(gen, regions, num_args, "arg_region"),
      i64_array(gen, offsets, num_args, "arg_offset"),
      cpu_i64(gen, num_downloads),
      i64_array(gen, down_offsets, num_downloads, "download_offset"),
      i64_array(gen, down_bytes, num_downloads, "download_bytes"),
      LLVMConstBitCast(state, gen->ptr),
  };
  free(regions);
  free(offsets);
  free(down_offsets);
  free(down_bytes);
  free(launches);
  snprintf(name, sizeof name, "%s_gpu_program", gen->prefix);
  LLVMValueRef program = LLVMAddGlobal(gen->module, program_type, name);
  LLVMSetInitializer(program, LLVMConstNamedStruct(program_type, values, 12));
  LLVMSetGlobalConstant(program, true);
  return LLVMConstBitCast(program, gen->ptr);
}

void gpu_emit_host_entry(CpuGen *gen, const char *ptx) {
  LLVMValueRef program = emit_program(gen, ptx);
  char name[160];
  snprintf(name, sizeof name, "%s_run", gen->prefix);
  LLVMTypeRef params[3] = {gen->ptr, gen->ptr, gen->ptr};
  LLVMValueRef fn =
      LLVMAddFunction(gen->module, name, LLVMFunctionType(gen->void_type, params, 3, false));
  LLVMPositionBuilderAtEnd(gen->builder, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  LLVMValueRef args[3] = {program, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1)};
  cpu_libcall(gen, "tfm_gpu_run", gen->void_type, params, args, 3);
  LLVMBuildRetVoid(gen->builder);
  cpu_emit_update(gen);
  cpu_emit_size(gen, "persistent_bytes", gen->plan->persistent_bytes);
  cpu_emit_size(gen, "scratch_bytes", gen->plan->scratch_bytes);
}

/* Small builders over the LLVM C API that every kind of kernel uses. */
#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gen.h"
#include "eval.h"

LLVMTypeRef gen_type(const Gen *gen, GraphDtype dtype) {
  switch (dtype) {
  case GRAPH_F64: return gen->f64;
  case GRAPH_I32: return gen->i32;
  default: return gen->f32; /* f32, and bf16 computed in f32 */
  }
}

LLVMTypeRef gen_storage_type(const Gen *gen, GraphDtype dtype) {
  return dtype == GRAPH_BF16 ? gen->i16 : gen_type(gen, dtype);
}

/* bf16 bits to f32: the 16 bits are the f32's high half (exact). */
LLVMValueRef gen_bf16_widen(Gen *gen, LLVMValueRef bits) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef wide = LLVMBuildZExt(b, bits, gen->i32, "");
  return LLVMBuildBitCast(b, LLVMBuildShl(b, wide, gen_i32(gen, 16), ""), gen->f32, "");
}

/* The f32 bits of x rounded to bf16 (low half zero): round to nearest,
 * ties to even, by adding 0x7fff plus the kept half's lowest bit; a NaN
 * keeps its sign and high payload and gets the quiet bit, so it stays a
 * NaN; an overflow rounds to infinity. As eval_bf16_round. */
static LLVMValueRef bf16_rounded_bits(Gen *gen, LLVMValueRef x) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef u = LLVMBuildBitCast(b, x, gen->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, gen_i32(gen, 16), ""), gen_i32(gen, 1), "");
  LLVMValueRef up = LLVMBuildAdd(b, u, LLVMBuildAdd(b, lsb, gen_i32(gen, 0x7fff), ""), "");
  LLVMValueRef high = gen_i32(gen, (int32_t)0xffff0000u);
  LLVMValueRef rounded = LLVMBuildAnd(b, up, high, "");
  LLVMValueRef quiet = LLVMBuildOr(b, LLVMBuildAnd(b, u, high, ""), gen_i32(gen, 0x00400000), "");
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  return LLVMBuildSelect(b, nan, quiet, rounded, "");
}

/* A call of fn carrying fn's function attributes' "vector-function-abi-
 * variant": LLVM 14's vectorizer reads it from the call, not the callee. */
static LLVMValueRef call_conversion(Gen *gen, LLVMValueRef fn, LLVMValueRef x) {
  LLVMValueRef call = LLVMBuildCall2(gen->builder, LLVMGlobalGetValueType(fn), fn, &x, 1, "");
  static const char key[] = "vector-function-abi-variant";
  LLVMAttributeRef variants = LLVMGetStringAttributeAtIndex(fn, LLVMAttributeFunctionIndex, key, sizeof key - 1);
  if (variants)
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, variants);
  return call;
}

LLVMValueRef gen_bf16_round(Gen *gen, LLVMValueRef x) {
  if (gen->bf16_round_fn)
    return call_conversion(gen, gen->bf16_round_fn, x);
  return LLVMBuildBitCast(gen->builder, bf16_rounded_bits(gen, x), gen->f32, "");
}

LLVMValueRef gen_bf16_narrow(Gen *gen, LLVMValueRef x) {
  if (gen->bf16_narrow_fn)
    return call_conversion(gen, gen->bf16_narrow_fn, x);
  LLVMBuilderRef b = gen->builder;
  return LLVMBuildTrunc(b, LLVMBuildLShr(b, bf16_rounded_bits(gen, x), gen_i32(gen, 16), ""),
                        gen->i16, "");
}

LLVMValueRef gen_load_value(Gen *gen, GraphDtype dtype, LLVMValueRef ptr) {
  LLVMValueRef v = LLVMBuildLoad2(gen->builder, gen_storage_type(gen, dtype), ptr, "");
  return dtype == GRAPH_BF16 ? gen_bf16_widen(gen, v) : v;
}

void gen_store_value(Gen *gen, GraphDtype dtype, LLVMValueRef v, LLVMValueRef ptr) {
  LLVMBuildStore(gen->builder, dtype == GRAPH_BF16 ? gen_bf16_narrow(gen, v) : v, ptr);
}

LLVMValueRef gen_i64(const Gen *gen, int64_t value) {
  return LLVMConstInt(gen->i64, (unsigned long long)value, true);
}

LLVMValueRef gen_i32(const Gen *gen, int32_t value) {
  return LLVMConstInt(gen->i32, (unsigned long long)(int64_t)value, true);
}

/* As eval_tensor_set: floats round, integers saturate and NaN becomes 0. */
LLVMValueRef gen_constant(const Gen *gen, GraphDtype dtype, double value) {
  switch (dtype) {
  case GRAPH_F64: return LLVMConstReal(gen->f64, value);
  case GRAPH_BF16: return LLVMConstReal(gen->f32, (double)eval_bf16_round((float)value));
  case GRAPH_I32: {
    int32_t v = isnan(value)             ? 0
                : value >= 2147483647.0  ? INT32_MAX
                : value <= -2147483648.0 ? INT32_MIN
                                         : (int32_t)value;
    return gen_i32(gen, v);
  }
  default: return LLVMConstReal(gen->f32, (double)(float)value);
  }
}

LLVMValueRef gen_entry_alloca(Gen *gen, LLVMTypeRef type, const char *name) {
  LLVMBasicBlockRef current = LLVMGetInsertBlock(gen->builder);
  LLVMValueRef fn = LLVMGetBasicBlockParent(current);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(gen->context);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(b, first);
  else
    LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef slot = LLVMBuildAlloca(b, type, name);
  LLVMDisposeBuilder(b);
  return slot;
}

void gen_loop_begin(Gen *gen, GenLoop *loop, LLVMValueRef begin, LLVMValueRef end) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  loop->counter = gen_entry_alloca(gen, gen->i64, "i");
  LLVMBuildStore(b, begin, loop->counter);
  loop->header = LLVMAppendBasicBlockInContext(gen->context, fn, "loop");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(gen->context, fn, "body");
  loop->exit = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  LLVMBuildBr(b, loop->header);
  LLVMPositionBuilderAtEnd(b, loop->header);
  LLVMValueRef i = LLVMBuildLoad2(b, gen->i64, loop->counter, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, end, ""), body, loop->exit);
  LLVMPositionBuilderAtEnd(b, body);
  loop->index = i;
}

void gen_loop_end(Gen *gen, GenLoop *loop) { gen_loop_end_interleaved(gen, loop, 1); }

void gen_loop_end_interleaved(Gen *gen, GenLoop *loop, unsigned count) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef next = LLVMBuildAdd(b, loop->index, gen_i64(gen, 1), "");
  LLVMBuildStore(b, next, loop->counter);
  LLVMValueRef back = LLVMBuildBr(b, loop->header);
  if (count > 1) {
    /* The loop's ID: a distinct node whose first operand is itself, then
     * the hint (LLVM's LangRef, "llvm.loop"). */
    LLVMContextRef c = gen->context;
    LLVMMetadataRef hint[2] = {
        LLVMMDStringInContext2(c, "llvm.loop.interleave.count", strlen("llvm.loop.interleave.count")),
        LLVMValueAsMetadata(LLVMConstInt(gen->i32, count, false))};
    LLVMMetadataRef self = LLVMTemporaryMDNode(c, NULL, 0);
    LLVMMetadataRef operands[2] = {self, LLVMMDNodeInContext2(c, hint, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(c, operands, 2);
    LLVMMetadataReplaceAllUsesWith(self, id);
    LLVMSetMetadata(back, LLVMGetMDKindIDInContext(c, "llvm.loop", strlen("llvm.loop")),
                    LLVMMetadataAsValue(c, id));
  }
  LLVMPositionBuilderAtEnd(b, loop->exit);
}

LLVMValueRef gen_intrinsic(Gen *gen, const char *name, LLVMTypeRef *types, int num_types,
                           LLVMValueRef *args, int num_args) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(gen->module, id, types, (size_t)num_types);
  LLVMTypeRef fn_type = LLVMIntrinsicGetType(gen->context, id, types, (size_t)num_types);
  return LLVMBuildCall2(gen->builder, fn_type, fn, args, (unsigned)num_args, "");
}

LLVMValueRef gen_fmuladd(Gen *gen, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMTypeRef type = LLVMTypeOf(x);
  LLVMValueRef args[3] = {x, y, z};
  return gen_intrinsic(gen, "llvm.fmuladd", &type, 1, args, 3);
}

LLVMValueRef gen_splat(Gen *gen, LLVMValueRef x, unsigned lanes) {
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), lanes);
  LLVMValueRef v = LLVMBuildInsertElement(gen->builder, LLVMGetUndef(vt), x, gen_i32(gen, 0), "");
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(gen->i32, lanes));
  return LLVMBuildShuffleVector(gen->builder, v, LLVMGetUndef(vt), zeros, "");
}

void gen_transpose_square(Gen *gen, LLVMValueRef *v, int n) {
  for (int bit = 1; bit < n; bit *= 2) {
    LLVMValueRef low[32], high[32];
    for (int l = 0; l < n; l++) {
      low[l] = gen_i32(gen, l & bit ? n + l - bit : l);
      high[l] = gen_i32(gen, l & bit ? n + l : l + bit);
    }
    for (int r = 0; r < n; r++) {
      if (r & bit) continue;
      LLVMValueRef x = v[r], y = v[r + bit];
      v[r] = LLVMBuildShuffleVector(gen->builder, x, y, LLVMConstVector(low, (unsigned)n), "");
      v[r + bit] = LLVMBuildShuffleVector(gen->builder, x, y, LLVMConstVector(high, (unsigned)n), "");
    }
  }
}

LLVMValueRef gen_lane_sum(Gen *gen, LLVMValueRef v) {
  LLVMBuilderRef b = gen->builder;
  if (LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMVectorTypeKind) return v;
  for (unsigned w = LLVMGetVectorSize(LLVMTypeOf(v)); w > 1; w /= 2) {
    LLVMValueRef lo[32], hi[32], undef = LLVMGetUndef(LLVMTypeOf(v));
    for (unsigned i = 0; i < w / 2; i++) {
      lo[i] = gen_i32(gen, (int32_t)i);
      hi[i] = gen_i32(gen, (int32_t)(w / 2 + i));
    }
    LLVMValueRef low = LLVMBuildShuffleVector(b, v, undef, LLVMConstVector(lo, w / 2), "");
    LLVMValueRef high = LLVMBuildShuffleVector(b, v, undef, LLVMConstVector(hi, w / 2), "");
    v = LLVMBuildFAdd(b, low, high, "");
  }
  return LLVMBuildExtractElement(b, v, gen_i32(gen, 0), "");
}

LLVMValueRef gen_libcall(Gen *gen, const char *name, LLVMTypeRef result, LLVMTypeRef *params,
                         LLVMValueRef *args, int num_args) {
  LLVMTypeRef fn_type = LLVMFunctionType(result, params, (unsigned)num_args, false);
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  if (!fn)
    fn = LLVMAddFunction(gen->module, name, fn_type);
  return LLVMBuildCall2(gen->builder, fn_type, fn, args, (unsigned)num_args, "");
}

LLVMValueRef gen_math_call(Gen *gen, const char *name, LLVMTypeRef type, LLVMValueRef *args,
                           int num_args) {
  LLVMTypeRef params[2] = {type, type};
  LLVMValueRef call = gen_libcall(gen, name, type, params, args, num_args);
  /* As under -fno-math-errno: errno is never read, so the function is pure
   * and defined for every input, and LICM may hoist a call whose argument
   * is the same for a whole row out of the row's loop. */
  static const char *const pure[] = {"readnone", "nounwind", "willreturn", "speculatable"};
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  for (size_t i = 0; i < sizeof pure / sizeof pure[0]; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(pure[i], strlen(pure[i]));
    if (kind) /* LLVM 16 spells readnone memory(none); without it the call stays opaque */
      LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                              LLVMCreateEnumAttribute(gen->context, kind, 0));
  }
  return call;
}

LLVMValueRef gen_element(Gen *gen, LLVMTypeRef element, LLVMValueRef base, LLVMValueRef index) {
  return LLVMBuildInBoundsGEP2(gen->builder, element, base, &index, 1, "");
}

LLVMValueRef gen_kernel_arg(Gen *gen, LLVMValueRef args, int i, LLVMTypeRef element) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef ptr_ptr = LLVMPointerType(gen->ptr, 0);
  LLVMValueRef slots = LLVMBuildBitCast(b, args, ptr_ptr, "");
  LLVMValueRef slot = gen_element(gen, gen->ptr, slots, gen_i64(gen, i));
  LLVMValueRef raw = LLVMBuildLoad2(b, gen->ptr, slot, "");
  return LLVMBuildBitCast(b, raw, LLVMPointerType(element, 0), "");
}

int gen_kernel_arg_of(const Gen *gen, const Kernel *kernel, GraphId node) {
  int buffer = gen->plan->buffer_of[node];
  for (int i = 0; i < kernel->num_args; i++)
    if (kernel->args[i] == buffer) return i;
  return -1;
}

void gen_add_attributes(Gen *gen, LLVMValueRef fn, const char *const *names, int count) {
  for (int i = 0; i < count; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[i], strlen(names[i]));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(gen->context, kind, 0));
  }
}

LLVMValueRef gen_kernel_function(Gen *gen, int function) {
  const KernelPlan *plan = gen->plan;
  const Kernel *k = &plan->kernels[plan->function_kernel[function]];
  char name[128];
  snprintf(name, sizeof name, "%s_k%d_%s", gen->prefix, function,
           graph_op_name(graph_node(gen->graph, k->root)->op));
  LLVMValueRef fn = LLVMAddFunction(gen->module, name, gen->range_fn);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  /* Inlined into P_run, every kernel would be compiled twice (the serial
   * call and the pointer passed to tfm_parallel_for). */
  const char *attributes[2] = {"noinline", "nounwind"};
  gen_add_attributes(gen, fn, attributes, 2);
  LLVMPositionBuilderAtEnd(gen->builder, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  gen->functions[function] = fn;
  return fn;
}

LLVMValueRef gen_imul(Gen *gen, LLVMValueRef a, int64_t c) {
  return LLVMBuildMul(gen->builder, a, gen_i64(gen, c), "");
}

LLVMValueRef gen_iadd(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAdd(gen->builder, a, b, "");
}

LLVMValueRef gen_load_at(Gen *gen, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildLoad2(gen->builder, t, gen_element(gen, t, base, i), "");
}

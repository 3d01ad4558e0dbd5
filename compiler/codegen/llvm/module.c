/* The steps of making a module that every target's driver (cpu/cpu.c,
 * ptx/ptx.c) takes alike: the generator's types and tables, the plan's
 * functions through the target, verification, O3 and printing. */
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "gen.h"

void gen_init_types(Gen *gen) {
  LLVMContextRef c = gen->context;
  gen->i1 = LLVMInt1TypeInContext(c);
  gen->i8 = LLVMInt8TypeInContext(c);
  gen->i16 = LLVMInt16TypeInContext(c);
  gen->i32 = LLVMInt32TypeInContext(c);
  gen->i64 = LLVMInt64TypeInContext(c);
  gen->f32 = LLVMFloatTypeInContext(c);
  gen->f64 = LLVMDoubleTypeInContext(c);
  gen->void_type = LLVMVoidTypeInContext(c);
  gen->ptr = LLVMPointerType(gen->i8, 0);
  LLVMTypeRef params[3] = {gen->ptr, gen->i64, gen->i64};
  gen->range_fn = LLVMFunctionType(gen->void_type, params, 3, false);
}

bool gen_alloc_tables(Gen *gen) {
  gen->functions = calloc((size_t)gen->plan->num_functions + 1, sizeof(LLVMValueRef));
  gen->constant_data = calloc((size_t)graph_count(gen->graph) + 1, sizeof(LLVMValueRef));
  return gen->functions && gen->constant_data;
}

void gen_free_tables(Gen *gen) {
  free(gen->functions);
  free(gen->constant_data);
  gen->functions = gen->constant_data = NULL;
}

bool gen_emit_module(Gen *gen) {
  const KernelPlan *plan = gen->plan;
  if (!gen_alloc_tables(gen))
    return false;
  if (gen->target->emit_kernel)
    for (int f = 0; f < plan->num_functions; f++)
      gen->target->emit_kernel(gen, f, &plan->kernels[plan->function_kernel[f]]);
  if (gen->target->emit_entry)
    gen->target->emit_entry(gen);
  return true;
}

bool gen_fail_llvm(char *err, size_t size, const char *what, char *message) {
  errbuf_set(err, size, "%s: %s", what, message ? message : "unknown error");
  LLVMDisposeMessage(message);
  return false;
}

bool gen_verify(LLVMModuleRef module, char *err, size_t size) {
  char *message = NULL;
  if (LLVMVerifyModule(module, LLVMReturnStatusAction, &message))
    return gen_fail_llvm(err, size, "invalid LLVM module", message);
  LLVMDisposeMessage(message);
  return true;
}

bool gen_optimize(LLVMModuleRef module, LLVMTargetMachineRef machine, char *err, size_t size) {
  LLVMPassBuilderOptionsRef passes = LLVMCreatePassBuilderOptions();
  LLVMErrorRef error = LLVMRunPasses(module, "default<O3>", machine, passes);
  LLVMDisposePassBuilderOptions(passes);
  return !error || gen_fail_llvm(err, size, "optimisation", LLVMGetErrorMessage(error));
}

char *gen_machine_text(LLVMTargetMachineRef machine, LLVMModuleRef module, const char *what,
                       char *err, size_t size) {
  char *message = NULL;
  LLVMMemoryBufferRef buffer;
  if (LLVMTargetMachineEmitToMemoryBuffer(machine, module, LLVMAssemblyFile, &message, &buffer)) {
    gen_fail_llvm(err, size, what, message);
    return NULL;
  }
  size_t n = LLVMGetBufferSize(buffer);
  char *text = malloc(n + 1);
  if (text) {
    memcpy(text, LLVMGetBufferStart(buffer), n);
    text[n] = '\0';
  } else {
    errbuf_set(err, size, "out of memory");
  }
  LLVMDisposeMemoryBuffer(buffer);
  return text;
}

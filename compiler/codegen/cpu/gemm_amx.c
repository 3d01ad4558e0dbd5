/* The AMX family of bf16 GEMMs (gemm_bf16.c's driver): tdpbf16ps on
 * Intel's tile registers. Eight tiles of 16 rows x 64 bytes: C's 32 x 32
 * f32 micro tile in tiles 0-3 (2 x 2 of 16 x 16), A's 32 rows x 32 k in
 * tiles 4-5, B's 32 k x 32 columns (two strips, 16 pair rows of 16
 * columns) in tiles 6-7; each k step of 32 is four loads and four
 * products of 16 x 16 x 32. C's tiles are loaded from the driver's f32
 * block (or zeroed) before a k block and stored back after it.
 *
 * LLVM 14's tile intrinsics with immediate tile numbers: the driver loads
 * the configuration once (ldtilecfg) and releases the tiles (tilerelease)
 * before it returns; nothing between touches them but these calls, which
 * LLVM keeps in order (they read and write memory as far as it knows). */
#include "cpu_internal.h"

enum { TILE_ROWS = 16, TILE_BYTES = 64 };

static LLVMValueRef tile_number(Gen *gen, int t) { return LLVMConstInt(gen->i8, (unsigned)t, false); }

static void tile_call(Gen *gen, const char *name, LLVMValueRef *args, int num_args) {
  gen_intrinsic(gen, name, NULL, 0, args, num_args);
}

void cpu_amx_configure(Gen *gen) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef config_type = LLVMArrayType(gen->i8, 64);
  LLVMValueRef config = gen_entry_alloca(gen, config_type, "tile_config");
  LLVMSetAlignment(config, 64);
  LLVMValueRef bytes = LLVMBuildBitCast(b, config, gen->ptr, "");
  LLVMBuildMemSet(b, bytes, LLVMConstInt(gen->i8, 0, false), gen_i64(gen, 64), 64);
  /* palette 1; bytes 16 + 2t: tile t's bytes per row; 48 + t: its rows */
  LLVMBuildStore(b, LLVMConstInt(gen->i8, 1, false), bytes);
  for (int t = 0; t < 8; t++) {
    LLVMValueRef width = LLVMBuildBitCast(b, gen_element(gen, gen->i8, bytes, gen_i64(gen, 16 + 2 * t)),
                                          LLVMPointerType(gen->i16, 0), "");
    LLVMBuildStore(b, LLVMConstInt(gen->i16, TILE_BYTES, false), width);
    LLVMBuildStore(b, LLVMConstInt(gen->i8, TILE_ROWS, false),
                   gen_element(gen, gen->i8, bytes, gen_i64(gen, 48 + t)));
  }
  tile_call(gen, "llvm.x86.ldtilecfg", &bytes, 1);
}

void cpu_amx_release(Gen *gen) { tile_call(gen, "llvm.x86.tilerelease", NULL, 0); }

void cpu_amx_load(Gen *gen, int t, LLVMValueRef base, LLVMValueRef stride_bytes) {
  LLVMValueRef args[3] = {tile_number(gen, t), LLVMBuildBitCast(gen->builder, base, gen->ptr, ""),
                          stride_bytes};
  tile_call(gen, "llvm.x86.tileloadd64", args, 3);
}

void cpu_amx_store(Gen *gen, int t, LLVMValueRef base, LLVMValueRef stride_bytes) {
  LLVMValueRef args[3] = {tile_number(gen, t), LLVMBuildBitCast(gen->builder, base, gen->ptr, ""),
                          stride_bytes};
  tile_call(gen, "llvm.x86.tilestored64", args, 3);
}

void cpu_amx_zero(Gen *gen, int t) {
  LLVMValueRef number = tile_number(gen, t);
  tile_call(gen, "llvm.x86.tilezero", &number, 1);
}

void cpu_amx_dot(Gen *gen, int c, int a, int b) {
  LLVMValueRef args[3] = {tile_number(gen, c), tile_number(gen, a), tile_number(gen, b)};
  tile_call(gen, "llvm.x86.tdpbf16ps", args, 3);
}

/* C tile t: rows 16 (t / 2) on, columns 16 (t % 2) on. */
static LLVMValueRef c_tile(Gen *gen, LLVMValueRef c, LLVMValueRef ldc, int t) {
  LLVMValueRef at = gen_iadd(gen, LLVMBuildMul(gen->builder, gen_i64(gen, (t / 2) * 16), ldc, ""),
                             gen_i64(gen, (t % 2) * 16));
  return gen_element(gen, gen->f32, c, at);
}

static void emit_micro(Gen *gen, LLVMValueRef fn) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef kc = LLVMGetParam(fn, 0), kp = LLVMGetParam(fn, 1), a = LLVMGetParam(fn, 2);
  LLVMValueRef bp = LLVMGetParam(fn, 3), c = LLVMGetParam(fn, 4), ldc = LLVMGetParam(fn, 5);
  LLVMValueRef c_stride = gen_imul(gen, ldc, 4);
  LLVMBasicBlockRef load = LLVMAppendBasicBlockInContext(gen->context, fn, "load_c");
  LLVMBasicBlockRef zero = LLVMAppendBasicBlockInContext(gen->context, fn, "zero_c");
  LLVMBasicBlockRef steps = LLVMAppendBasicBlockInContext(gen->context, fn, "steps");
  LLVMBuildCondBr(b, LLVMGetParam(fn, 6), load, zero);
  LLVMPositionBuilderAtEnd(b, load);
  for (int t = 0; t < 4; t++)
    cpu_amx_load(gen, t, c_tile(gen, c, ldc, t), c_stride);
  LLVMBuildBr(b, steps);
  LLVMPositionBuilderAtEnd(b, zero);
  for (int t = 0; t < 4; t++)
    cpu_amx_zero(gen, t);
  LLVMBuildBr(b, steps);
  LLVMPositionBuilderAtEnd(b, steps);
  /* Both operands' tiles are 1 KiB blocks, 512 elements a k step. */
  LLVMValueRef a_second = gen_element(gen, gen->i16, a, gen_imul(gen, kp, 16));
  LLVMValueRef b_second = gen_element(gen, gen->i16, bp, gen_imul(gen, kp, 16));
  LLVMValueRef stride = gen_i64(gen, TILE_BYTES);
  GenLoop step;
  gen_loop_begin(gen, &step, gen_i64(gen, 0), LLVMBuildSDiv(b, kc, gen_i64(gen, 32), ""));
  LLVMValueRef at = gen_imul(gen, step.index, 512);
  cpu_amx_load(gen, 4, gen_element(gen, gen->i16, a, at), stride);
  cpu_amx_load(gen, 5, gen_element(gen, gen->i16, a_second, at), stride);
  cpu_amx_load(gen, 6, gen_element(gen, gen->i16, bp, at), stride);
  cpu_amx_load(gen, 7, gen_element(gen, gen->i16, b_second, at), stride);
  static const int products[4][3] = {{0, 4, 6}, {1, 4, 7}, {2, 5, 6}, {3, 5, 7}};
  for (int i = 0; i < 4; i++)
    cpu_amx_dot(gen, products[i][0], products[i][1], products[i][2]);
  gen_loop_end(gen, &step);
  for (int t = 0; t < 4; t++)
    cpu_amx_store(gen, t, c_tile(gen, c, ldc, t), c_stride);
  LLVMBuildRetVoid(b);
}

const CpuPairFamily cpu_amx_family = {.name = "amx",
                                      .features = "+amx-tile,+amx-bf16,+avx512bf16",
                                      .rows = 32,
                                      .micro = emit_micro,
                                      .begin = cpu_amx_configure,
                                      .end = cpu_amx_release};

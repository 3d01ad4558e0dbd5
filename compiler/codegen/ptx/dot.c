/* Contractions on the GPU. f32 dots are tiled tensor-core kernels
 * (mma.m16n8k8 on tf32, see ptx_dot_tile.h): their products are rounded to
 * tf32 (10 mantissa bits), so they differ from the CPU by up to about 2^-10
 * of sum |a||b| (docs/internals.md). bf16 dots are the same kernel with
 * mma.m16n8k16 on bf16 tiles: the operands are bf16 already, products and
 * sums f32, C rounded once to bf16, as on the CPU. f64 dots (tf32 would lose their
 * precision) and integer dots keep one thread per element of C:
 * neighbouring threads take neighbouring columns j, so their reads of B
 * (untransposed) and their writes of C are coalesced; k runs ascending, as
 * the evaluator sums, so the result rounds as the CPU's does. */
#include <stdio.h>

#include "ptx.h"
#include "ptx_dot_tile.h"
#include "ptx_internal.h"

/* The host launches every kernel in blocks of PTX_BLOCK_THREADS; a tiled
 * dot's thread-to-tile mapping assumes its blocks are exactly those. */
_Static_assert(PTX_DOT_THREADS == PTX_BLOCK_THREADS, "a tiled dot's block is a launch block");

/* ---- The tiled tensor-core kernel (f32) ---- */

static LLVMValueRef udiv(Gen *gen, LLVMValueRef a, int64_t c) {
  return LLVMBuildUDiv(gen->builder, a, gen_i64(gen, c), "");
}

static LLVMValueRef urem(Gen *gen, LLVMValueRef a, int64_t c) {
  return LLVMBuildURem(gen->builder, a, gen_i64(gen, c), "");
}

static LLVMValueRef addc(Gen *gen, LLVMValueRef a, int64_t c) {
  return gen_iadd(gen, a, gen_i64(gen, c));
}

static LLVMValueRef below(Gen *gen, LLVMValueRef a, int64_t bound) {
  return LLVMBuildICmp(gen->builder, LLVMIntULT, a, gen_i64(gen, bound), "");
}

/* A shared-memory array of `count` elements: i32 (tf32 values) or i16
 * (bf16). */
static LLVMValueRef shared_array(Gen *gen, int function, char which, LLVMTypeRef element,
                                 int64_t count) {
  char name[64];
  snprintf(name, sizeof name, "dot%d_%c", function, which);
  return ptx_shared_array(gen, name, element, count, 16);
}

/* Element `index` of `base` rounded to tf32, or 0 where `ok` is false: the
 * index is clamped to 0 first, so edge tiles never read past a buffer. */
static LLVMValueRef guarded_tf32(Gen *gen, LLVMValueRef base, LLVMValueRef index,
                                 LLVMValueRef ok) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(gen->context);
  LLVMValueRef v = gen_load_at(gen, f32, base, LLVMBuildSelect(b, ok, index, gen_i64(gen, 0), ""));
  v = LLVMBuildSelect(b, ok, v, LLVMConstReal(f32, 0.0), "");
  return gen_intrinsic(gen, "llvm.nvvm.f2tf32.rna", NULL, 0, &v, 1);
}

/* Element `index` of a bf16 buffer (i16 bits), or +0 where `ok` is false. */
static LLVMValueRef guarded_bf16(Gen *gen, LLVMValueRef base, LLVMValueRef index,
                                 LLVMValueRef ok) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef v = gen_load_at(gen, gen->i16, base, LLVMBuildSelect(b, ok, index, gen_i64(gen, 0), ""));
  return LLVMBuildSelect(b, ok, v, LLVMConstInt(gen->i16, 0, false), "");
}

typedef struct DotTile {
  bool bf16;                      /* mma.m16n8k16 on bf16 tiles, else m16n8k8 on tf32 */
  LLVMValueRef a, b, c;           /* global buffers */
  LLVMValueRef a_base, b_base;    /* the batch's offsets into A and B */
  LLVMValueRef row0, col0, p0;    /* the tile's origin in C, the step's in k */
  LLVMValueRef tid, group, quad, warp_row, warp_col;
  LLVMValueRef as, bs;            /* shared tiles */
  int64_t m, n, k;
  bool ta, tb;
} DotTile;

/* Each thread's share of the A and B tiles of one k step into shared
 * memory (see ptx_dot_a_inner / ptx_dot_b_inner). */
static void stage(Gen *gen, const DotTile *t) {
  for (int s = 0; s < PTX_DOT_A_STEPS; s++) {
    LLVMValueRef e = addc(gen, t->tid, (int64_t)s * PTX_DOT_THREADS);
    LLVMValueRef slow = udiv(gen, e, ptx_dot_a_inner(t->ta));
    LLVMValueRef fast = urem(gen, e, ptx_dot_a_inner(t->ta));
    LLVMValueRef r = t->ta ? fast : slow, kk = t->ta ? slow : fast;
    LLVMValueRef gi = gen_iadd(gen, t->row0, r), gp = gen_iadd(gen, t->p0, kk);
    LLVMValueRef ok = LLVMBuildAnd(gen->builder, below(gen, gi, t->m), below(gen, gp, t->k), "");
    LLVMValueRef index = t->ta ? gen_iadd(gen, gen_imul(gen, gp, t->m), gi) : gen_iadd(gen, gen_imul(gen, gi, t->k), gp);
    if (t->bf16) {
      LLVMValueRef v = guarded_bf16(gen, t->a, gen_iadd(gen, t->a_base, index), ok);
      LLVMBuildStore(gen->builder, v,
                     ptx_shared_element(gen, t->as, gen_iadd(gen, gen_imul(gen, r, PTX_DOT16_AS_STRIDE), kk)));
      continue;
    }
    LLVMValueRef v = guarded_tf32(gen, t->a, gen_iadd(gen, t->a_base, index), ok);
    LLVMBuildStore(gen->builder, v,
                   ptx_shared_element(gen, t->as, gen_iadd(gen, gen_imul(gen, r, PTX_DOT_AS_STRIDE), kk)));
  }
  for (int s = 0; s < PTX_DOT_B_STEPS; s++) {
    LLVMValueRef e = addc(gen, t->tid, (int64_t)s * PTX_DOT_THREADS);
    LLVMValueRef slow = udiv(gen, e, ptx_dot_b_inner(t->tb));
    LLVMValueRef fast = urem(gen, e, ptx_dot_b_inner(t->tb));
    LLVMValueRef c = t->tb ? slow : fast, kk = t->tb ? fast : slow;
    LLVMValueRef gj = gen_iadd(gen, t->col0, c), gp = gen_iadd(gen, t->p0, kk);
    LLVMValueRef ok = LLVMBuildAnd(gen->builder, below(gen, gj, t->n), below(gen, gp, t->k), "");
    LLVMValueRef index = t->tb ? gen_iadd(gen, gen_imul(gen, gj, t->k), gp) : gen_iadd(gen, gen_imul(gen, gp, t->n), gj);
    if (t->bf16) { /* transposed: [BN][BK] */
      LLVMValueRef v = guarded_bf16(gen, t->b, gen_iadd(gen, t->b_base, index), ok);
      LLVMBuildStore(gen->builder, v,
                     ptx_shared_element(gen, t->bs, gen_iadd(gen, gen_imul(gen, c, PTX_DOT16_BS_STRIDE), kk)));
      continue;
    }
    LLVMValueRef v = guarded_tf32(gen, t->b, gen_iadd(gen, t->b_base, index), ok);
    LLVMBuildStore(gen->builder, v,
                   ptx_shared_element(gen, t->bs, gen_iadd(gen, gen_imul(gen, kk, PTX_DOT_BS_STRIDE), c)));
  }
}

#define MMA_TILES_M (PTX_DOT_WARP_TILE / PTX_MMA_M)
#define MMA_TILES_N (PTX_DOT_WARP_TILE / PTX_MMA_N)

static LLVMValueRef shared_load(Gen *gen, LLVMValueRef array, LLVMValueRef i) {
  return LLVMBuildLoad2(gen->builder, gen->i32, ptx_shared_element(gen, array, i), "");
}

/* The 32-bit word at bf16 element i (even) of an i16 shared array: the
 * two bf16 at i and i + 1, i in the low half. */
static LLVMValueRef shared_word(Gen *gen, LLVMValueRef array, LLVMValueRef i) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef p = LLVMBuildBitCast(b, ptx_shared_element(gen, array, i),
                                    LLVMPointerType(gen->i32, 3), "");
  LLVMValueRef v = LLVMBuildLoad2(b, gen->i32, p, "");
  LLVMSetAlignment(v, 4);
  return v;
}

/* mma.sync needs every lane of the warp, but LLVM 14 declares the mma
 * intrinsics without `convergent` and its backend's machine instructions
 * as free of side effects. Where an edge tile left all of an mma's results
 * to stores that only some lanes make, the backend sank the mma under a
 * branch on the lane: on an H200 a 1 x 1 x 1 dot returned A x 1.0 and a
 * 17 x 17 one a wrong last element. So each call is marked convergent (for
 * the IR passes), and after the k loop every accumulator goes, in the
 * block where every lane is, to an empty inline asm with side effects
 * (ptx_pin), which emits nothing and which no pass moves: an mma
 * then always has a use before the lanes' stores branch, and the hot loop
 * keeps its schedule. */
void ptx_mark_convergent(Gen *gen, LLVMValueRef call) {
  unsigned kind = LLVMGetEnumAttributeKindForName("convergent", 10);
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                           LLVMCreateEnumAttribute(gen->context, kind, 0));
}

void ptx_pin(Gen *gen, LLVMValueRef values[4]) {
  LLVMTypeRef f32 = LLVMFloatTypeInContext(gen->context);
  LLVMTypeRef params[4] = {f32, f32, f32, f32};
  LLVMTypeRef type = LLVMFunctionType(gen->void_type, params, 4, false);
  char constraints[] = "f,f,f,f";
  LLVMValueRef asm_ = LLVMGetInlineAsm(type, (char *)"", 0, constraints, sizeof constraints - 1,
                                       true, false, LLVMInlineAsmDialectATT, false);
  LLVMBuildCall2(gen->builder, type, asm_, values, 4, "");
}

/* One mma `intrinsic` per warp tile (mi, ni): A fragment fa[mi] (4
 * registers), B fragment fb[ni] (2), accumulating into acc[mi][ni]. */
static void issue_mma(Gen *gen, const char *intrinsic, LLVMValueRef fa[MMA_TILES_M][4],
                      LLVMValueRef fb[MMA_TILES_N][2],
                      LLVMValueRef acc[MMA_TILES_M][MMA_TILES_N][4]) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(gen->context);
  for (int mi = 0; mi < MMA_TILES_M; mi++)
    for (int ni = 0; ni < MMA_TILES_N; ni++) {
      LLVMValueRef args[10] = {fa[mi][0], fa[mi][1], fa[mi][2], fa[mi][3], fb[ni][0], fb[ni][1]};
      for (int i = 0; i < 4; i++)
        args[6 + i] = LLVMBuildLoad2(b, f32, acc[mi][ni][i], "");
      LLVMValueRef d = gen_intrinsic(gen, intrinsic, NULL, 0, args, 10);
      ptx_mark_convergent(gen, d);
      for (int i = 0; i < 4; i++)
        LLVMBuildStore(b, LLVMBuildExtractValue(b, d, (unsigned)i, ""), acc[mi][ni][i]);
    }
}

/* bf16: one mma.m16n8k16 per tile over the staged step (BK = 16). */
static void multiply_bf16(Gen *gen, const DotTile *t,
                          LLVMValueRef acc[MMA_TILES_M][MMA_TILES_N][4]) {
  for (int ks = 0; ks < PTX_DOT_BK; ks += PTX_MMA16_K) {
    LLVMValueRef fa[MMA_TILES_M][4], fb[MMA_TILES_N][2];
    LLVMValueRef quad2 = gen_imul(gen, t->quad, 2);
    for (int mi = 0; mi < MMA_TILES_M; mi++)
      for (int r = 0; r < 4; r++) {
        LLVMValueRef row =
            gen_iadd(gen, t->warp_row, addc(gen, t->group, mi * PTX_MMA_M + ptx_mma16_a_row(2 * r)));
        LLVMValueRef kk = addc(gen, quad2, ks + ptx_mma16_a_col(2 * r));
        fa[mi][r] = shared_word(gen, t->as, gen_iadd(gen, gen_imul(gen, row, PTX_DOT16_AS_STRIDE), kk));
      }
    for (int ni = 0; ni < MMA_TILES_N; ni++)
      for (int r = 0; r < 2; r++) {
        LLVMValueRef kk = addc(gen, quad2, ks + ptx_mma16_b_row(2 * r));
        LLVMValueRef c = gen_iadd(gen, t->warp_col, addc(gen, t->group, ni * PTX_MMA_N));
        fb[ni][r] = shared_word(gen, t->bs, gen_iadd(gen, gen_imul(gen, c, PTX_DOT16_BS_STRIDE), kk));
      }
    issue_mma(gen, "llvm.nvvm.mma.m16n8k16.row.col.bf16", fa, fb, acc);
  }
}

/* The warp's 2 x 4 mma tiles over the staged k step, accumulating into
 * acc[mi][ni][i] (allocas, which SROA makes registers). */
static void multiply(Gen *gen, const DotTile *t, LLVMValueRef acc[MMA_TILES_M][MMA_TILES_N][4]) {
  if (t->bf16) {
    multiply_bf16(gen, t, acc);
    return;
  }
  for (int ks = 0; ks < PTX_DOT_BK; ks += PTX_MMA_K) {
    LLVMValueRef fa[MMA_TILES_M][4], fb[MMA_TILES_N][2];
    for (int mi = 0; mi < MMA_TILES_M; mi++)
      for (int i = 0; i < 4; i++) {
        LLVMValueRef r = gen_iadd(gen, t->warp_row, addc(gen, t->group, mi * PTX_MMA_M + ptx_mma_a_row(i)));
        LLVMValueRef kk = addc(gen, t->quad, ks + ptx_mma_a_col(i));
        fa[mi][i] = shared_load(gen, t->as, gen_iadd(gen, gen_imul(gen, r, PTX_DOT_AS_STRIDE), kk));
      }
    for (int ni = 0; ni < MMA_TILES_N; ni++)
      for (int i = 0; i < 2; i++) {
        LLVMValueRef kk = addc(gen, t->quad, ks + ptx_mma_b_row(i));
        LLVMValueRef c = gen_iadd(gen, t->warp_col, addc(gen, t->group, ni * PTX_MMA_N));
        fb[ni][i] = shared_load(gen, t->bs, gen_iadd(gen, gen_imul(gen, kk, PTX_DOT_BS_STRIDE), c));
      }
    issue_mma(gen, "llvm.nvvm.mma.m16n8k8.row.col.tf32", fa, fb, acc);
  }
}

static void barrier(Gen *gen) { gen_intrinsic(gen, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); }

/* C[batch] (r, c) = v where r < m and c < n. */
static void store_guarded(Gen *gen, const DotTile *t, LLVMValueRef c_base, LLVMValueRef r,
                          LLVMValueRef c, LLVMValueRef v) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef write = LLVMAppendBasicBlockInContext(gen->context, fn, "store");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, LLVMBuildAnd(b, below(gen, r, t->m), below(gen, c, t->n), ""), write, next);
  LLVMPositionBuilderAtEnd(b, write);
  GraphDtype dt = t->bf16 ? GRAPH_BF16 : GRAPH_F32;
  LLVMValueRef at = gen_iadd(gen, c_base, gen_iadd(gen, gen_imul(gen, r, t->n), c));
  gen_store_value(gen, dt, v, gen_element(gen, gen_storage_type(gen, dt), t->c, at));
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
}

/* One block a BM x BN tile of C: thread `item` is thread item % 256 of
 * block item / 256 (the entry runs one item a thread, every thread of a
 * block, as ptx_work_items asks for whole blocks, so all reach each
 * barrier). Blocks run over the batch, then rows of tiles, then columns. */
static void emit_tiled(Gen *gen, int function, const DotTile *shape, LLVMValueRef fn,
                       int64_t batch_a, int64_t batch_b) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(gen->context);
  DotTile t = *shape;
  int64_t m = t.m, n = t.n, k = t.k;
  LLVMValueRef item = LLVMGetParam(fn, 1);
  t.tid = urem(gen, item, PTX_DOT_THREADS);
  LLVMValueRef block = udiv(gen, item, PTX_DOT_THREADS);
  int64_t tiles_n = ptx_dot_tiles(n, PTX_DOT_BN), tiles_m = ptx_dot_tiles(m, PTX_DOT_BM);
  t.col0 = gen_imul(gen, urem(gen, block, tiles_n), PTX_DOT_BN);
  LLVMValueRef rest = udiv(gen, block, tiles_n);
  t.row0 = gen_imul(gen, urem(gen, rest, tiles_m), PTX_DOT_BM);
  LLVMValueRef batch = udiv(gen, rest, tiles_m);
  t.a_base = batch_a ? gen_imul(gen, batch, batch_a) : gen_i64(gen, 0);
  t.b_base = batch_b ? gen_imul(gen, batch, batch_b) : gen_i64(gen, 0);
  LLVMValueRef warp = udiv(gen, t.tid, 32), lane = urem(gen, t.tid, 32);
  t.group = udiv(gen, lane, PTX_MMA_GROUP);
  t.quad = urem(gen, lane, PTX_MMA_GROUP);
  t.warp_row = gen_imul(gen, udiv(gen, warp, PTX_DOT_WARPS_N), PTX_DOT_WARP_TILE);
  t.warp_col = gen_imul(gen, urem(gen, warp, PTX_DOT_WARPS_N), PTX_DOT_WARP_TILE);
  if (t.bf16) {
    t.as = shared_array(gen, function, 'a', gen->i16, PTX_DOT_BM * PTX_DOT16_AS_STRIDE);
    t.bs = shared_array(gen, function, 'b', gen->i16, PTX_DOT_BN * PTX_DOT16_BS_STRIDE);
  } else {
    t.as = shared_array(gen, function, 'a', gen->i32, PTX_DOT_BM * PTX_DOT_AS_STRIDE);
    t.bs = shared_array(gen, function, 'b', gen->i32, PTX_DOT_BK * PTX_DOT_BS_STRIDE);
  }
  LLVMValueRef acc[MMA_TILES_M][MMA_TILES_N][4];
  for (int mi = 0; mi < MMA_TILES_M; mi++)
    for (int ni = 0; ni < MMA_TILES_N; ni++)
      for (int i = 0; i < 4; i++) {
        acc[mi][ni][i] = gen_entry_alloca(gen, f32, "acc");
        LLVMBuildStore(b, LLVMConstReal(f32, 0.0), acc[mi][ni][i]);
      }
  GenLoop step;
  gen_loop_begin(gen, &step, gen_i64(gen, 0), gen_i64(gen, ptx_dot_tiles(k, PTX_DOT_BK)));
  t.p0 = gen_imul(gen, step.index, PTX_DOT_BK);
  /* The previous step's reads of the shared tiles finish before they are
   * overwritten, and the new tiles are whole before anyone reads them. */
  barrier(gen);
  stage(gen, &t);
  barrier(gen);
  multiply(gen, &t, acc);
  gen_loop_end(gen, &step);
  for (int mi = 0; mi < MMA_TILES_M; mi++) /* see ptx_mark_convergent */
    for (int ni = 0; ni < MMA_TILES_N; ni++) {
      LLVMValueRef values[4];
      for (int i = 0; i < 4; i++)
        values[i] = LLVMBuildLoad2(b, f32, acc[mi][ni][i], "");
      ptx_pin(gen, values);
    }
  LLVMValueRef c_base = gen_imul(gen, batch, m * n);
  for (int mi = 0; mi < MMA_TILES_M; mi++)
    for (int ni = 0; ni < MMA_TILES_N; ni++)
      for (int i = 0; i < 4; i++) {
        LLVMValueRef r = gen_iadd(gen, gen_iadd(gen, t.row0, t.warp_row),
                             addc(gen, t.group, mi * PTX_MMA_M + ptx_mma_c_row(i)));
        LLVMValueRef c = gen_iadd(gen, gen_iadd(gen, t.col0, t.warp_col),
                             addc(gen, gen_imul(gen, t.quad, 2), ni * PTX_MMA_N + ptx_mma_c_col(i)));
        store_guarded(gen, &t, c_base, r, c, LLVMBuildLoad2(b, f32, acc[mi][ni][i], ""));
      }
  LLVMBuildRetVoid(b);
}

bool ptx_dot_tiled(const GraphNode *dot) {
  return dot->dtype == GRAPH_F32 || dot->dtype == GRAPH_BF16;
}

int64_t ptx_dot_tiled_items(const GraphNode *dot) {
  int r = dot->shape.rank;
  int64_t batch = graph_shape_numel(&dot->shape) / (dot->shape.dims[r - 2] * dot->shape.dims[r - 1]);
  return batch * ptx_dot_tiles(dot->shape.dims[r - 2], PTX_DOT_BM) *
         ptx_dot_tiles(dot->shape.dims[r - 1], PTX_DOT_BN) * PTX_DOT_THREADS;
}

/* With `tiled`, an f32 or bf16 dot (ptx_dot_tiled) as the tiled
 * tensor-core kernel; every other dot one work item an element of C. */
static void emit_dot(Gen *gen, int function, const Kernel *kernel, bool tiled) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *node = graph_node(gen->graph, kernel->root);
  const GraphShape *sa = &graph_node(gen->graph, node->inputs[0])->shape;
  const GraphShape *sb = &graph_node(gen->graph, node->inputs[1])->shape;
  int r = node->shape.rank;
  int64_t m = node->shape.dims[r - 2], n = node->shape.dims[r - 1];
  bool ta = node->attrs.transpose_a, tb = node->attrs.transpose_b;
  int64_t k = sa->dims[sa->rank - (ta ? 2 : 1)];
  GraphDtype dt = node->dtype;
  LLVMTypeRef t = gen_type(gen, dt), st = gen_storage_type(gen, dt);
  LLVMValueRef fn = gen_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef c = gen_kernel_arg(gen, args, 0, st);
  /* Arguments are distinct buffers: a dot of x with itself has one input. */
  LLVMValueRef a = gen_kernel_arg(gen, args, 1, st);
  LLVMValueRef bm = gen_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, st);
  if (tiled && ptx_dot_tiled(node)) {
    DotTile tile = {.bf16 = dt == GRAPH_BF16, .a = a, .b = bm, .c = c, .m = m, .n = n, .k = k,
                    .ta = ta, .tb = tb};
    emit_tiled(gen, function, &tile, fn, sa->rank > 2 ? m * k : 0, sb->rank > 2 ? k * n : 0);
    return;
  }
  GenLoop item, p;
  gen_loop_begin(gen, &item, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef row = LLVMBuildUDiv(b, item.index, gen_i64(gen, n), "");
  LLVMValueRef j = LLVMBuildURem(b, item.index, gen_i64(gen, n), "");
  LLVMValueRef batch = LLVMBuildUDiv(b, row, gen_i64(gen, m), "");
  LLVMValueRef i = LLVMBuildURem(b, row, gen_i64(gen, m), "");
  LLVMValueRef a_base = sa->rank > 2 ? gen_imul(gen, batch, m * k) : gen_i64(gen, 0);
  LLVMValueRef b_base = sb->rank > 2 ? gen_imul(gen, batch, k * n) : gen_i64(gen, 0);
  LLVMValueRef acc = gen_entry_alloca(gen, t, "acc");
  LLVMBuildStore(b, LLVMConstReal(t, 0.0), acc);
  gen_loop_begin(gen, &p, gen_i64(gen, 0), gen_i64(gen, k));
  LLVMValueRef ai = ta ? gen_iadd(gen, a_base, gen_iadd(gen, gen_imul(gen, p.index, m), i))
                       : gen_iadd(gen, a_base, gen_iadd(gen, gen_imul(gen, i, k), p.index));
  LLVMValueRef bi = tb ? gen_iadd(gen, b_base, gen_iadd(gen, gen_imul(gen, j, k), p.index))
                       : gen_iadd(gen, b_base, gen_iadd(gen, gen_imul(gen, p.index, n), j));
  LLVMValueRef prod = LLVMBuildFMul(b, gen_load_value(gen, dt, gen_element(gen, st, a, ai)),
                                    gen_load_value(gen, dt, gen_element(gen, st, bm, bi)), "");
  LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, t, acc, ""), prod, ""), acc);
  gen_loop_end(gen, &p);
  gen_store_value(gen, dt, LLVMBuildLoad2(b, t, acc, ""), gen_element(gen, st, c, item.index));
  gen_loop_end(gen, &item);
  LLVMBuildRetVoid(b);
}

void ptx_emit_dot_kernel(Gen *gen, int function, const Kernel *kernel) {
  emit_dot(gen, function, kernel, true);
}

void ptx_emit_dot_elements(Gen *gen, int function, const Kernel *kernel) {
  emit_dot(gen, function, kernel, false);
}

/* The layout ptx_emit_dot_kernel reads, as strides: C's batches are
 * contiguous; an operand of rank 2 is shared by every batch (stride 0). */
bool ptx_dot_on_cublas(const KernelPlan *plan, int kernel, int64_t desc[PTX_GEMM_FIELDS]) {
  const Kernel *kr = &plan->kernels[kernel];
  if (kr->kind != KERNEL_DOT)
    return false;
  const GraphNode *node = graph_node(plan->graph, kr->root);
  if (kernel_storage_dtype(node->dtype) != GRAPH_F32)
    return false;
  const GraphShape *sa = &graph_node(plan->graph, node->inputs[0])->shape;
  const GraphShape *sb = &graph_node(plan->graph, node->inputs[1])->shape;
  int r = node->shape.rank;
  int64_t m = node->shape.dims[r - 2], n = node->shape.dims[r - 1];
  bool ta = node->attrs.transpose_a;
  int64_t k = sa->dims[sa->rank - (ta ? 2 : 1)];
  int64_t batch = m * n > 0 ? graph_shape_numel(&node->shape) / (m * n) : 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX)
    return false;
  desc[PTX_GEMM_TRANSA] = ta;
  desc[PTX_GEMM_TRANSB] = node->attrs.transpose_b;
  desc[PTX_GEMM_M] = m;
  desc[PTX_GEMM_N] = n;
  desc[PTX_GEMM_K] = k;
  desc[PTX_GEMM_BATCH] = batch;
  desc[PTX_GEMM_STRIDE_A] = sa->rank > 2 ? m * k : 0;
  desc[PTX_GEMM_STRIDE_B] = sb->rank > 2 ? k * n : 0;
  desc[PTX_GEMM_STRIDE_C] = m * n;
  return true;
}

/* Fused attention's forward on AMX tiles: the CPU's counterpart of
 * ptx/attention_mma.c, for the same ops and padding masks: attention (with
 * or without the attention_lse kernel formation paired with it), causal or
 * not, with no mask input or one value per key (amx_mask_per_key), whose q,
 * k and v are bf16 values (--dtype bf16 graphs, where each
 * is a cast of a bf16 node, so their bf16 copies are exact). Also the
 * choice, at each call, between these kernels (this forward, and the
 * merged backward of attention_amx_backward.c) and attention.c's: the
 * tiles' when the runtime's tfm_cpu_kernels() is AMX.
 *
 * A tile is 16 queries of one batch, which are the lanes of every zmm
 * below; keys go in blocks of 32 and chunks of 8 blocks:
 *   S^T = K Q^T     per block two C tiles (16 keys x 16 queries each),
 *                   the head in steps of 32 (A: k rows, B: q transposed),
 *                   stored for the chunk;
 *   softmax         lane-wise: scale, add the key's mask value, hide keys
 *                   past the end (and past the query when causal), the
 *                   chunk's max m', the sums l and
 *                   the output rescaled once by exp(m - m') (FlashAttention's
 *                   online softmax), p = exp(s - m') as two bf16 parts,
 *                   p_hi = bf16(p) and p_lo = bf16(p - p_hi), in the B
 *                   layout (pairs of keys x 16 queries);
 *   O^T += V^T P^T  O^T's 16-column tiles (of v, rows here) held in tiles
 *                   0-3 across the chunk's blocks (A: v transposed).
 * o = O / l (O^T transposed back) and lse = m + log l. Products and sums
 * are f32, so o differs from attention.c's by the order of its sums and
 * p's split (2^-17 of p), as the GPU's mma kernel does. k and v are packed
 * once per batch a call (attention_amx_pack.c), q once per tile. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention_amx.h"
#include "tfmrt.h"

enum { ROWS = 16, KEYS = 32 };
/* Key blocks whose scores are taken before one softmax step: the output's
 * rescaling and its trip through the tiles happen once a chunk, not once a
 * block (gpt's 256 keys are one chunk). */
enum { CHUNK_BLOCKS = 8 };

typedef struct Flash {
  Gen *gen;
  LLVMBuilderRef b;
  int64_t t, s, d, dv;
  int d_steps, v_tiles; /* the head in steps of 32, v's columns in tiles of 16 */
  int64_t key_blocks;   /* of all S keys */
  bool causal;
  double scale;
  LLVMValueRef q, k, v, out, lse;
  /* the mask input (one value per key; mask.data NULL: none), and the
   * tile's batch's values (key j's at j mask.stride[rank - 1]) */
  GenMaskMap mask;
  LLVMValueRef mask_keys;
  /* packed k and v of a batch, q of a tile; a chunk's scores (per block
   * 32 keys x 16 queries, f32) and p's two parts (per block a B tile);
   * the tile's O^T (16 v_tiles rows x 16 queries, f32), and per query its
   * running max, sum l and the chunk's max (vectors) */
  LLVMValueRef kpack, vpack, qpack, scores, p_hi, p_lo, acc, max, sums, chunk_max;
} Flash;

static LLVMValueRef i64c(Flash *f, int64_t v) { return gen_i64(f->gen, v); }

/* The scores of key block blk, transposed: K Q^T into `dst` (32 keys x
 * 16 queries). */
static void block_scores(Flash *f, LLVMValueRef blk, LLVMValueRef dst) {
  Gen *gen = f->gen;
  LLVMValueRef row = i64c(f, AMX_ROW_BYTES);
  cpu_amx_zero(gen, 0);
  cpu_amx_zero(gen, 1);
  for (int step = 0; step < f->d_steps; step++) {
    cpu_amx_load(gen, 4, amx_tile(gen, f->qpack, i64c(f, 0), 0, step), row);
    /* the block's two groups of 16 keys, 2 blk and 2 blk + 1 */
    for (int h = 0; h < 2; h++)
      cpu_amx_load(gen, 6 + h, amx_tile(gen, f->kpack, gen_iadd(gen, gen_imul(gen, blk, 2), i64c(f, h)), f->d_steps, step),
                   row);
    cpu_amx_dot(gen, 0, 6, 4);
    cpu_amx_dot(gen, 1, 7, 4);
  }
  cpu_amx_store(gen, 0, dst, row);
  cpu_amx_store(gen, 1, gen_element(gen, gen->f32, dst, i64c(f, 16 * 16)), row);
}

/* Row e of the scores of key block blk (at `scores`), a lane per query:
 * scaled, plus the key's mask value, -inf where hidden (past the keys'
 * end, or the query's when causal); *hidden says where, and where the
 * mask made the score -inf. */
static LLVMValueRef visible_scores(Flash *f, LLVMValueRef scores, LLVMValueRef blk, int e, LLVMValueRef query,
                                   LLVMValueRef *hidden) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMValueRef s = LLVMBuildFMul(b, amx_load16(f->gen, gen_element(gen, gen->f32, scores, i64c(f, 16 * e)), 16),
                                 amx_splat_f32(f->gen, f->scale), "");
  LLVMValueRef key = LLVMBuildAdd(b, LLVMBuildTrunc(b, gen_imul(gen, blk, KEYS), gen->i32, ""), gen_i32(gen, e), "");
  *hidden = gen_splat(gen, LLVMBuildICmp(b, LLVMIntSGE, key, gen_i32(gen, (int32_t)f->s), ""), 16);
  if (f->mask.data) {
    LLVMValueRef j = gen_iadd(gen, gen_imul(gen, blk, KEYS), i64c(f, e));
    s = LLVMBuildFAdd(b, s, amx_key_mask(gen, &f->mask, f->mask_keys, j, f->s), "");
    *hidden = LLVMBuildOr(b, *hidden, LLVMBuildFCmp(b, LLVMRealOEQ, s, amx_splat_f32(gen, -INFINITY), ""), "");
  }
  if (f->causal)
    *hidden = LLVMBuildOr(b, *hidden, LLVMBuildICmp(b, LLVMIntSGT, gen_splat(gen, key, 16), query, ""), "");
  return LLVMBuildSelect(b, *hidden, amx_splat_f32(f->gen, -INFINITY), s, "");
}

/* The softmax step of a chunk (key blocks first .. first + count - 1,
 * their scores in `scores`) for the tile whose first query is i0, a lane
 * each: the chunk's max, the rescaling of the sums and the output by
 * exp(m - m'), then p = exp(s - m') and its two parts as B tiles, a block
 * 512 elements on. */
static void chunk_softmax(Flash *f, LLVMValueRef first, LLVMValueRef count, LLVMValueRef i0) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMValueRef neg_inf = amx_splat_f32(f->gen, -INFINITY), zero = LLVMConstNull(amx_f32x16(f->gen));
  LLVMValueRef query = LLVMBuildAdd(b, gen_splat(gen, LLVMBuildTrunc(b, i0, gen->i32, ""), 16),
                                    amx_lanes(f->gen, 0, 1), "");
  LLVMValueRef m_old = LLVMBuildLoad2(b, amx_f32x16(f->gen), f->max, "");
  LLVMBuildStore(b, m_old, f->chunk_max);
  GenLoop blk;
  gen_loop_begin(gen, &blk, i64c(f, 0), count);
  LLVMValueRef scores = gen_element(gen, gen->f32, f->scores, gen_imul(gen, blk.index, KEYS * 16));
  LLVMValueRef m = LLVMBuildLoad2(b, amx_f32x16(f->gen), f->chunk_max, ""), hidden;
  for (int e = 0; e < KEYS; e++)
    m = amx_max(f->gen, m, visible_scores(f, scores, gen_iadd(gen, first, blk.index), e, query, &hidden));
  LLVMBuildStore(b, m, f->chunk_max);
  gen_loop_end(gen, &blk);

  LLVMValueRef m_new = LLVMBuildLoad2(b, amx_f32x16(f->gen), f->chunk_max, "");
  /* a query still without a visible key keeps 0 (its shift taken as 0) */
  LLVMValueRef shift = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, m_new, neg_inf, ""), zero, m_new, "");
  LLVMValueRef alpha = gen_exp_f32(gen, LLVMBuildFSub(b, m_old, shift, ""));
  LLVMBuildStore(b, m_new, f->max);
  LLVMBuildStore(b, LLVMBuildFMul(b, LLVMBuildLoad2(b, amx_f32x16(f->gen), f->sums, ""), alpha, ""), f->sums);
  for (int c = 0; c < 16 * f->v_tiles; c++) {
    LLVMValueRef at = gen_element(gen, gen->f32, f->acc, i64c(f, 16 * c));
    amx_store16(f->gen, LLVMBuildFMul(b, amx_load16(f->gen, at, 16), alpha, ""), at, 16);
  }

  /* a pair of keys at a time, which keeps a few vectors live (all 32 rows
   * at once spilled most of them) */
  gen_loop_begin(gen, &blk, i64c(f, 0), count);
  scores = gen_element(gen, gen->f32, f->scores, gen_imul(gen, blk.index, KEYS * 16));
  LLVMValueRef sum = LLVMBuildLoad2(b, amx_f32x16(f->gen), f->sums, "");
  LLVMValueRef tile = gen_imul(gen, blk.index, AMX_TILE_ELEMENTS);
  for (int pair = 0; pair < KEYS / 2; pair++) {
    LLVMValueRef p[2];
    for (int e = 0; e < 2; e++) {
      LLVMValueRef s = visible_scores(f, scores, gen_iadd(gen, first, blk.index), 2 * pair + e, query, &hidden);
      /* hidden lanes take exp(0), not exp(-inf), whose underflow costs a
       * microcode assist on these CPUs */
      LLVMValueRef x = LLVMBuildSelect(b, hidden, zero, LLVMBuildFSub(b, s, shift, ""), "");
      p[e] = LLVMBuildSelect(b, hidden, zero, gen_exp_f32(gen, x), "");
      sum = LLVMBuildFAdd(b, sum, p[e], "");
    }
    amx_split_pair(gen, p, true, f->p_hi, f->p_lo, gen_iadd(gen, tile, i64c(f, 32 * pair)));
  }
  LLVMBuildStore(b, sum, f->sums);
  gen_loop_end(gen, &blk);
}

/* O^T += V^T (p_hi + p_lo)^T over a chunk's key blocks, four 16-column
 * tiles of v at a time held in tiles 0-3 across the blocks (independent
 * chains; A tiles 6 and 7 in turn, p's parts in 4 and 5). */
static void chunk_output(Flash *f, LLVMValueRef first, LLVMValueRef count) {
  Gen *gen = f->gen;
  LLVMValueRef row = i64c(f, AMX_ROW_BYTES);
  for (int ct0 = 0; ct0 < f->v_tiles; ct0 += 4) {
    int group = (int)amx_min(4, f->v_tiles - ct0);
    for (int g = 0; g < group; g++)
      cpu_amx_load(gen, g, gen_element(gen, gen->f32, f->acc, i64c(f, AMX_TILE_ELEMENTS / 2 * (ct0 + g))), row);
    GenLoop blk;
    gen_loop_begin(gen, &blk, i64c(f, 0), count);
    cpu_amx_load(gen, 4, amx_tile(gen, f->p_hi, blk.index, 1, 0), row);
    cpu_amx_load(gen, 5, amx_tile(gen, f->p_lo, blk.index, 1, 0), row);
    for (int g = 0; g < group; g++) {
      cpu_amx_load(gen, 6 + g % 2, amx_tile(gen, f->vpack, gen_iadd(gen, first, blk.index), f->v_tiles, ct0 + g), row);
      cpu_amx_dot(gen, g, 6 + g % 2, 4);
      cpu_amx_dot(gen, g, 6 + g % 2, 5);
    }
    gen_loop_end(gen, &blk);
    for (int g = 0; g < group; g++)
      cpu_amx_store(gen, g, gen_element(gen, gen->f32, f->acc, i64c(f, AMX_TILE_ELEMENTS / 2 * (ct0 + g))), row);
  }
}

/* Rows row0 .. row0 + n - 1 of o (and lse): O / l (O^T transposed back)
 * and m + log l; a row that saw no key gets o = 0 and lse = -inf. */
static void store_rows(Flash *f, LLVMValueRef row0, LLVMValueRef n) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMTypeRef vf = amx_f32x16(gen);
  LLVMValueRef l = LLVMBuildLoad2(b, vf, f->sums, "");
  LLVMValueRef denom = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, l, LLVMConstNull(vf), ""),
                                       amx_splat_f32(gen, 1.0), l, "");
  for (int ct = 0; ct < f->v_tiles; ct++) {
    LLVMValueRef o[16];
    for (int c = 0; c < 16; c++)
      o[c] = LLVMBuildFDiv(b, amx_load16(gen, gen_element(gen, gen->f32, f->acc, i64c(f, 16 * (16 * ct + c))), 16),
                           denom, "");
    amx_store_columns(gen, o, f->out, row0, n, f->dv, 16 * ct);
  }
  if (!f->lse) return;
  GenLoop q;
  gen_loop_begin(gen, &q, i64c(f, 0), n);
  LLVMValueRef lq = gen_load_at(gen, gen->f32, LLVMBuildBitCast(b, f->sums, LLVMPointerType(gen->f32, 0), ""), q.index);
  LLVMValueRef mq = gen_load_at(gen, gen->f32, LLVMBuildBitCast(b, f->max, LLVMPointerType(gen->f32, 0), ""), q.index);
  LLVMValueRef lse = LLVMBuildFAdd(b, mq, gen_libcall(gen, "logf", gen->f32, &gen->f32, &lq, 1), "");
  LLVMValueRef none = LLVMBuildFCmp(b, LLVMRealOEQ, lq, LLVMConstReal(gen->f32, 0.0), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, none, LLVMConstReal(gen->f32, -INFINITY), lse, ""),
                 gen_element(gen, gen->f32, f->lse, gen_iadd(gen, row0, q.index)));
  gen_loop_end(gen, &q);
}

static int64_t packed_bytes(int64_t s, int64_t d, int64_t dv) {
  int64_t blocks = (s + KEYS - 1) / KEYS;
  return blocks * KEYS * ((d + 31) / 32 * 32 + (dv + 15) / 16 * 16) * 2;
}

static bool forward_applies(const Gen *gen, const Kernel *kernel) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  if (gen->vector_bits < 512 || n->op != GRAPH_OP_ATTENTION || n->dtype != GRAPH_F32 ||
      (n->num_inputs == 4 ? !amx_mask_per_key(&graph_node(g, n->inputs[3])->shape) : n->num_inputs != 3))
    return false;
  for (int i = 0; i < 3; i++)
    if (!kernel_bf16_valued(g, n->inputs[i])) return false;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape, *vs = &graph_node(g, n->inputs[2])->shape;
  int64_t s = vs->dims[vs->rank - 2];
  return s < INT32_MAX / 2 && qs->dims[qs->rank - 2] < INT32_MAX / 2 &&
         packed_bytes(s, qs->dims[qs->rank - 1], vs->dims[vs->rank - 1]) <= AMX_ATTENTION_MAX_BYTES;
}

/* void name(i8 *args, i64 begin, i64 end): rows [begin, end) of the
 * output, in tiles of up to 16 within a batch. */
static LLVMValueRef emit_forward(Gen *gen, const Kernel *kernel, const char *name) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape, *vs = &graph_node(g, n->inputs[2])->shape;
  LLVMTypeRef params[3] = {gen->ptr, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 3, cpu_amx_family.features);
  LLVMTypeRef vf = amx_f32x16(gen);
  Flash f = {.gen = gen, .b = gen->builder, .t = qs->dims[qs->rank - 2], .d = qs->dims[qs->rank - 1],
             .s = vs->dims[vs->rank - 2], .dv = vs->dims[vs->rank - 1], .causal = n->attrs.causal,
             .scale = n->attrs.scale};
  LLVMBuilderRef b = f.b;
  f.d_steps = (int)((f.d + 31) / 32);
  f.v_tiles = (int)((f.dv + 15) / 16);
  f.key_blocks = (f.s + KEYS - 1) / KEYS;
  LLVMValueRef args = LLVMGetParam(fn, 0), begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef *in[3] = {&f.q, &f.k, &f.v};
  for (int i = 0; i < 3; i++) *in[i] = gen_kernel_arg(gen, args, gen_kernel_arg_of(gen, kernel, n->inputs[i]), gen->f32);
  if (n->num_inputs == 4)
    f.mask = gen_mask_map(gen_kernel_arg(gen, args, gen_kernel_arg_of(gen, kernel, n->inputs[3]), gen->f32),
                          &graph_node(g, n->inputs[3])->shape, qs);
  f.out = gen_kernel_arg(gen, args, 0, gen->f32);
  f.lse = kernel->also != GRAPH_NONE ? gen_kernel_arg(gen, args, 1, gen->f32) : NULL;
  f.kpack = amx_stack_array(gen, gen->i16, f.key_blocks * 2 * f.d_steps * AMX_TILE_ELEMENTS, "kpack");
  f.vpack = amx_stack_array(gen, gen->i16, f.key_blocks * f.v_tiles * AMX_TILE_ELEMENTS, "vpack");
  f.qpack = amx_stack_array(gen, gen->i16, f.d_steps * AMX_TILE_ELEMENTS, "qpack");
  f.scores = amx_stack_array(gen, gen->f32, CHUNK_BLOCKS * KEYS * ROWS, "scores");
  f.p_hi = amx_stack_array(gen, gen->i16, CHUNK_BLOCKS * AMX_TILE_ELEMENTS, "p_hi");
  f.p_lo = amx_stack_array(gen, gen->i16, CHUNK_BLOCKS * AMX_TILE_ELEMENTS, "p_lo");
  f.acc = amx_stack_array(gen, gen->f32, ROWS * 16 * f.v_tiles, "acc");
  f.max = gen_entry_alloca(gen, vf, "max");
  f.sums = gen_entry_alloca(gen, vf, "sums");
  f.chunk_max = gen_entry_alloca(gen, vf, "chunk_max");
  LLVMValueRef packed = gen_entry_alloca(gen, gen->i64, "packed_batch");
  LLVMValueRef next_row = gen_entry_alloca(gen, gen->i64, "row");
  LLVMBuildStore(b, i64c(&f, -1), packed);
  LLVMBuildStore(b, begin, next_row);
  cpu_amx_configure(gen);

  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(gen->context, fn, "tiles");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(gen->context, fn, "tile");
  LLVMBasicBlockRef pack = LLVMAppendBasicBlockInContext(gen->context, fn, "pack");
  LLVMBasicBlockRef rows = LLVMAppendBasicBlockInContext(gen->context, fn, "rows");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, header);
  LLVMValueRef row0 = LLVMBuildLoad2(b, gen->i64, next_row, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row0, end, ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef batch = LLVMBuildUDiv(b, row0, i64c(&f, f.t), "");
  LLVMValueRef i0 = LLVMBuildURem(b, row0, i64c(&f, f.t), "");
  LLVMValueRef count = cpu_min64(gen, cpu_min64(gen, i64c(&f, ROWS), LLVMBuildSub(b, end, row0, "")),
                                 LLVMBuildSub(b, i64c(&f, f.t), i0, ""));
  LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, gen->i64, packed, ""), batch, "");
  LLVMBuildCondBr(b, fresh, rows, pack);
  LLVMPositionBuilderAtEnd(b, pack);
  LLVMValueRef keys_of = gen_element(gen, gen->f32, f.k, gen_imul(gen, batch, f.s * f.d));
  LLVMValueRef values_of = gen_element(gen, gen->f32, f.v, gen_imul(gen, batch, f.s * f.dv));
  amx_pack_row_steps(gen, f.kpack, keys_of, i64c(&f, f.s), f.d, i64c(&f, 2 * f.key_blocks), false);
  amx_pack_row_pairs(gen, f.vpack, values_of, i64c(&f, f.s), f.dv, i64c(&f, f.key_blocks), true);
  LLVMBuildStore(b, batch, packed);
  LLVMBuildBr(b, rows);
  LLVMPositionBuilderAtEnd(b, rows);
  if (f.mask.data) f.mask_keys = gen_element(gen, gen->f32, f.mask.data, gen_mask_row(gen, &f.mask, batch, i64c(&f, 0)));
  /* the tile's queries; rows past count repeat its last (not stored) */
  LLVMValueRef queries = gen_element(gen, gen->f32, f.q, gen_iadd(gen, gen_imul(gen, batch, f.t * f.d), gen_imul(gen, i0, f.d)));
  amx_pack_row_steps(gen, f.qpack, queries, count, f.d, i64c(&f, 1), true);
  LLVMBuildStore(b, amx_splat_f32(gen, -INFINITY), f.max);
  LLVMBuildStore(b, LLVMConstNull(vf), f.sums);
  LLVMBuildMemSet(b, LLVMBuildBitCast(b, f.acc, gen->ptr, ""), LLVMConstInt(gen->i8, 0, false),
                  i64c(&f, ROWS * 16 * f.v_tiles * 4), 64);
  /* keys [0, i0 + count) when causal, else all */
  LLVMValueRef keys = f.causal ? gen_iadd(gen, i0, count) : i64c(&f, f.s);
  LLVMValueRef blocks = LLVMBuildUDiv(b, gen_iadd(gen, keys, i64c(&f, KEYS - 1)), i64c(&f, KEYS), "");
  GenLoop chunk, blk;
  cpu_step_loop_begin(gen, &chunk, blocks, CHUNK_BLOCKS);
  LLVMValueRef in_chunk = cpu_min64(gen, i64c(&f, CHUNK_BLOCKS), LLVMBuildSub(b, blocks, chunk.index, ""));
  gen_loop_begin(gen, &blk, i64c(&f, 0), in_chunk);
  block_scores(&f, gen_iadd(gen, chunk.index, blk.index),
               gen_element(gen, gen->f32, f.scores, gen_imul(gen, blk.index, KEYS * ROWS)));
  gen_loop_end(gen, &blk);
  chunk_softmax(&f, chunk.index, in_chunk, i0);
  chunk_output(&f, chunk.index, in_chunk);
  cpu_step_loop_end(gen, &chunk);
  store_rows(&f, row0, count);
  LLVMBuildStore(b, gen_iadd(gen, row0, count), next_row);
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, done);
  cpu_amx_release(gen);
  LLVMBuildRetVoid(b);
  return fn;
}

void cpu_emit_attention_kernel(Gen *gen, int function, const Kernel *kernel) {
  emit_attention_kernel(gen, function, kernel, NULL);
  LLVMValueRef (*emit_tiles)(Gen *, const Kernel *, const char *) =
      forward_applies(gen, kernel)                      ? emit_forward
      : cpu_attention_amx_backward_applies(gen, kernel) ? cpu_emit_attention_amx_backward
                                                        : NULL;
  if (!emit_tiles) return;
  /* attention.c's kernel becomes NAME_rows, the tiles' NAME_amx, and the
   * plan's function NAME picks one at each call */
  LLVMValueRef rows = gen->functions[function];
  size_t length;
  char name[192], renamed[208];
  snprintf(name, sizeof name, "%s", LLVMGetValueName2(rows, &length));
  snprintf(renamed, sizeof renamed, "%s_rows", name);
  LLVMSetValueName2(rows, renamed, strlen(renamed));
  snprintf(renamed, sizeof renamed, "%s_amx", name);
  LLVMValueRef tiles = emit_tiles(gen, kernel, renamed);
  LLVMValueRef fn = gen_kernel_function(gen, function);
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef args[3] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2)};
  LLVMValueRef family = gen_libcall(gen, "tfm_cpu_kernels", gen->i32, NULL, NULL, 0);
  LLVMBasicBlockRef on_tiles = LLVMAppendBasicBlockInContext(gen->context, fn, "amx");
  LLVMBasicBlockRef on_rows = LLVMAppendBasicBlockInContext(gen->context, fn, "rows");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, family, gen_i32(gen, TFM_CPU_KERNELS_AMX), ""), on_tiles,
                  on_rows);
  LLVMPositionBuilderAtEnd(b, on_tiles);
  LLVMBuildCall2(b, gen->range_fn, tiles, args, 3, "");
  LLVMBuildRetVoid(b);
  LLVMPositionBuilderAtEnd(b, on_rows);
  LLVMBuildCall2(b, gen->range_fn, rows, args, 3, "");
  LLVMBuildRetVoid(b);
}

/* One warp's mma.sync as the PTX ISA's fragment tables define it, written
 * out independently of the emitter's formulas (compiler/codegen/
 * ptx_dot_tile.h): used by the tiled dot's CPU model (dot_tile_model.c)
 * and by the PTX simulator (sim/ptx_exec.c). Products are summed in f32,
 * k in order; the tensor cores' order differs within rounding. */
#ifndef TFM_MMA_FRAGMENTS_H
#define TFM_MMA_FRAGMENTS_H

/* mma.m16n8k8.row.col.f32.tf32.tf32.f32 over one warp's registers, per the
 * PTX ISA's fragment layouts (groupID = lane >> 2, threadID_in_group =
 * lane % 4): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
 * b0 (k = t, n = g), b1 (k = t + 4, n = g); c0 (g, 2t), c1 (g, 2t + 1),
 * c2 (g + 8, 2t), c3 (g + 8, 2t + 1). */
static inline void tfm_mma_m16n8k8_tf32(float a[32][4], float b[32][2], float c[32][4]) {
  float A[16][8], B[8][8], C[16][8];
  for (int lane = 0; lane < 32; lane++) {
    int g = lane >> 2, t = lane % 4;
    A[g][t] = a[lane][0], A[g + 8][t] = a[lane][1];
    A[g][t + 4] = a[lane][2], A[g + 8][t + 4] = a[lane][3];
    B[t][g] = b[lane][0], B[t + 4][g] = b[lane][1];
    C[g][2 * t] = c[lane][0], C[g][2 * t + 1] = c[lane][1];
    C[g + 8][2 * t] = c[lane][2], C[g + 8][2 * t + 1] = c[lane][3];
  }
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++)
      for (int p = 0; p < 8; p++)
        C[i][j] += A[i][p] * B[p][j];
  for (int lane = 0; lane < 32; lane++) {
    int g = lane >> 2, t = lane % 4;
    c[lane][0] = C[g][2 * t], c[lane][1] = C[g][2 * t + 1];
    c[lane][2] = C[g + 8][2 * t], c[lane][3] = C[g + 8][2 * t + 1];
  }
}

/* mma.m16n8k16.row.col.f32.bf16.bf16.f32 per the PTX ISA's table: A
 * elements a0..a7 of a lane at rows g (a0, a1, a4, a5) or g + 8 (a2, a3,
 * a6, a7) and columns 2t + (i & 1), plus 8 for a4..a7; B elements b0..b3
 * at k = 2t + (i & 1), plus 8 for b2, b3, and n = g; C as for tf32. */
static inline void tfm_mma_m16n8k16_bf16(float a[32][8], float b[32][4], float c[32][4]) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; lane++) {
    int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 8; i++) {
      int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
      int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = a[lane][i];
    }
    for (int i = 0; i < 4; i++)
      B[t * 2 + (i & 1) + (i >= 2 ? 8 : 0)][g] = b[lane][i];
    C[g][2 * t] = c[lane][0], C[g][2 * t + 1] = c[lane][1];
    C[g + 8][2 * t] = c[lane][2], C[g + 8][2 * t + 1] = c[lane][3];
  }
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++)
      for (int p = 0; p < 16; p++)
        C[i][j] += A[i][p] * B[p][j];
  for (int lane = 0; lane < 32; lane++) {
    int g = lane >> 2, t = lane % 4;
    c[lane][0] = C[g][2 * t], c[lane][1] = C[g][2 * t + 1];
    c[lane][2] = C[g + 8][2 * t], c[lane][3] = C[g + 8][2 * t + 1];
  }
}

#endif

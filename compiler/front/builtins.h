/* The language's built-in names (builtins.c). */
#ifndef TFM_BUILTINS_H
#define TFM_BUILTINS_H
#include "scope.h"

/* Looks up a built-in name (functions, dtypes, initialisers, constants). */
Value *builtin_lookup(const char *name);
Value *builtin_call(Ctx *ctx, const Value *fn, const Node *call, Arg *args, int nargs);
const char *builtin_name(int id);
/* The value of the built-in `training` in the programs checked next
 * (FrontOptions.training; 1 until set). */
void builtins_set_training(int training);
/* The value of the built-in `decoding` (FrontOptions.decoding); clears the
 * decode positions. */
void builtins_set_decoding(int decoding);
/* While decoding: what decode_pos() returns (i32[B], the graph input `pos`)
 * and the length W of the caches kv_cache() makes. */
void builtins_set_decode_positions(Value *positions, int64_t window);

#endif

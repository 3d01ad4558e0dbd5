/* The built-ins of the decode-step graph (FrontOptions.decoding):
 * `decoding`, decode_pos() and kv_cache(). */
#include <inttypes.h>

#include "builtins.h"
#include "builtins_internal.h"
#include "diag.h"
#include "lower.h"
#include "shape.h"

/* Decoding (FrontOptions.decoding): `decoding`, and what decode_pos() and
 * kv_cache() read, set by the model's `tokens` input. */
static int decoding_value;
static Value *decode_positions;
static int64_t decode_window;

void builtins_set_decoding(int decoding) {
  decoding_value = decoding;
  decode_positions = NULL;
  decode_window = 0;
}

void builtins_set_decode_positions(Value *positions, int64_t window) {
  decode_positions = positions;
  decode_window = window;
}

int builtins_decoding(void) { return decoding_value; }

/* decode_pos(): i32[B], the position of each row's new token in the
 * decode-step graph. */
Value *builtin_decode_pos(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "decode_pos", "", args, nargs, a)) return value_error();
  if (!decode_positions) {
    diag_error(call->span, "decode_pos() has a value only while the decode-step graph is lowered "
                           "(under 'if decoding', in a model with inputs tokens and targets)");
    return value_error();
  }
  return decode_positions;
}

/* kv_cache(x, name): x [B, ..., 1, K] is the new token's row; the result
 * [B, ..., W, K] is the cache of the last W rows (W: the model's window,
 * the time axis of `tokens`) with x written at decode_pos(): a state of
 * the decode-step graph, carried from one step to the next. */
Value *builtin_kv_cache(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  if (!builtin_get_args(call, "kv_cache", "x name", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "kv_cache", "x");
  if (!x) return value_error();
  if (a[1]->value->kind != V_STR) {
    diag_error(a[1]->node->span, "kv_cache: name must be a string, got %s",
               value_kind_name(a[1]->value));
    return value_error();
  }
  if (!decode_positions) {
    diag_error(call->span, "kv_cache() has a value only while the decode-step graph is lowered "
                           "(under 'if decoding', in a model with inputs tokens and targets)");
    return value_error();
  }
  int r = x->t.rank;
  if (r < 3 || x->t.dims[r - 2] != 1 || x->t.dims[0] != decode_positions->t.dims[0] ||
      (x->t.dtype != DT_F32 && x->t.dtype != DT_F64)) {
    diag_error(a[0]->node->span, "kv_cache: x must be f32[B, ..., 1, K] (one new row per batch row, "
               "B = %" PRId64 "), got %s", decode_positions->t.dims[0], tensor_type_str(&x->t));
    return value_error();
  }
  TensorType t = x->t;
  t.dims[r - 2] = decode_window;
  t.origin[r - 2] = NULL;
  return builtin_lowered(&t, lower_kv_cache(x, decode_positions, a[1]->value->s, &t));
}

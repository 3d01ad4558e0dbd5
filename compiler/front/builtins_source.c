/* source(): the one built-in of pretrained blocks (sema_pretrained.c). */
#include "builtins_internal.h"
#include "diag.h"
#include "shape.h"

/* source(name, ?shape, ?dtype): a tensor of another tool's checkpoint, in
 * a pretrained block; the shape may be left out where the value is
 * assigned whole to a parameter (SourceHook.hint). */
Value *builtin_source(Ctx *ctx, const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  if (!builtin_get_args(call, "source", "name ?shape ?dtype", args, nargs, a)) return value_error();
  if (!ctx || !ctx->source) {
    diag_error(call->span, "source() reads a tensor of a pretrained checkpoint: it belongs in a "
               "'pretrained NAME { ... }' block");
    return value_error();
  }
  if (a[0]->value->kind != V_STR) {
    diag_error(a[0]->node->span, "source: the name must be a string, got %s",
               value_kind_name(a[0]->value));
    return value_error();
  }
  DType dt = DT_F32;
  if (a[2] && !builtin_dtype_arg(a[2], "source", &dt)) return value_error();
  Value *r;
  if (a[1]) {
    r = builtin_shaped(call, "source", a[1], dt);
  } else if (ctx->source->hint) {
    r = tensor_value(ctx->source->hint);
  } else {
    diag_error(call->span, "source(\"%s\"): give its shape, source(name, [d0, d1, ...]); it "
               "can be left out only where the value is assigned whole (or transposed) to a "
               "parameter", a[0]->value->s);
    return value_error();
  }
  if (r->kind != V_TENSOR) return r;
  int32_t node = ctx->source->declare(ctx->source, a[0]->value->s, &r->t, call->span);
  if (node == -2) return value_error();
  r->node = node;
  return r;
}

/* Shape rules of the language's tensor operators (broadcasting, matmul)
 * and the notes that explain where a dimension came from (shape.c). */
#ifndef TFM_SHAPE_H
#define TFM_SHAPE_H
#include "value.h"

/* Notes naming where each dimension of a tensor came from. */
void note_dims(const Node *n, const TensorType *t, int axis);
int broadcast_types(const TensorType *a, const TensorType *b, TensorType *out, int *bad_a,
                    int *bad_b);
/* Normalises a possibly negative axis; reports and returns -1 when out of range. */
int norm_axis(int64_t axis, int rank, const Node *at, const char *fn);
/* Checks a dimension value (positive, bounded). */
int check_dim(int64_t d, const Node *at);
int check_numel(const TensorType *t, const Node *at);
Value *tensor_value(const TensorType *t);
/* The tensor result of an operator between tensors and/or numbers. */
Value *tensor_binary(Op op, Value *a, Value *b, const Node *an, const Node *bn, const Node *at);
Value *tensor_matmul(Value *a, Value *b, const Node *an, const Node *bn, const Node *at);
/* Numbers become tensors of `dt` (rank 0) when mixed with tensors. */
int scalar_to_tensor(Value *v, DType dt, const Node *at, TensorType *out);

#endif

/* Compiles only while the runtime API that the generated header declares
 * agrees with the runtime's own headers: with those included first, the
 * header declares no types and redeclares every function, and a function
 * redeclared with another type is an error. */
#include "model.h"
#include "train.h"

#include "gpt.h"

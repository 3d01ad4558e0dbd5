/* State the scanner keeps beside flex's own: the file and the position. */
#ifndef TFM_LEXSTATE_H
#define TFM_LEXSTATE_H
#include "source.h"

enum { LEX_MAX_OPEN = 64 };

struct LexState {
  int file;
  int line, col;
  int errors;                /* reported by the scanner or the parser in this file */
  /* Brackets not yet closed, innermost last (positions of the first
   * LEX_MAX_OPEN only), so "unexpected end of file" can say which one. */
  int open_depth;
  Span open[LEX_MAX_OPEN];
};

#endif

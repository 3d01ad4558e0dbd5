/* State the scanner keeps beside flex's own: the file and the position. */
#ifndef TFM_LEXSTATE_H
#define TFM_LEXSTATE_H

struct LexState {
  int file;
  int line, col;
};

#endif

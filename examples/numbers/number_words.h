/* English words for the numbers 0..999999, the source side of the numbers task. */
#ifndef NUMBER_WORDS_H
#define NUMBER_WORDS_H

#include <stddef.h>

#define NUMBER_WORDS_LIMIT 1000000u /* numbers below this have words */

/* Writes the words of `number` (e.g. "forty thousand and seven") into text;
 * 0 on success, -1 when the number is out of range or text is too small. */
int number_words(unsigned number, char *text, size_t size);

#endif

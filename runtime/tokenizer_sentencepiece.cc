// SentencePiece through libsentencepiece: the thin C++ shim behind
// tokenizer_internal.h's tfm_tokenizer_sp_* functions. No exception or
// C++ type crosses into C; failures come back as messages.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

#include "tokenizer_internal.h"

struct tfm_tokenizer_sp {
  sentencepiece::SentencePieceProcessor processor;
  std::vector<int> ids;
  std::string text;
};

static int fail(char *error, size_t size, const std::string &message) {
  std::snprintf(error, size, "%s", message.c_str());
  return 1;
}

extern "C" int tfm_tokenizer_sp_load(const char *path, tfm_tokenizer_sp **sp, char *error,
                                     size_t error_size) {
  *sp = nullptr;
  tfm_tokenizer_sp *made = new (std::nothrow) tfm_tokenizer_sp;
  if (!made) return fail(error, error_size, "out of memory");
  try {
    auto status = made->processor.Load(path);
    if (!status.ok()) {
      delete made;
      return fail(error, error_size, "not a SentencePiece model: " + status.ToString());
    }
  } catch (const std::exception &e) {
    delete made;
    return fail(error, error_size, std::string("not a SentencePiece model: ") + e.what());
  }
  *sp = made;
  return 0;
}

extern "C" int tfm_tokenizer_sp_encode(tfm_tokenizer_sp *sp, const char *text, size_t size,
                                       tfm_tokenizer_ids *ids, char *error, size_t error_size) {
  try {
    sp->ids.clear();
    auto status = sp->processor.Encode(absl::string_view(text, size), &sp->ids);
    if (!status.ok()) return fail(error, error_size, status.ToString());
  } catch (const std::exception &e) {
    return fail(error, error_size, e.what());
  }
  for (int id : sp->ids)
    if (tfm_tokenizer_ids_push(ids, id) != 0) return fail(error, error_size, "out of memory");
  return 0;
}

extern "C" int tfm_tokenizer_sp_decode(tfm_tokenizer_sp *sp, const int32_t *ids, size_t count,
                                       tfm_tokenizer_text *out, char *error,
                                       size_t error_size) {
  try {
    std::vector<int> v(ids, ids + count);
    sp->text.clear();
    auto status = sp->processor.Decode(v, &sp->text);
    if (!status.ok()) return fail(error, error_size, status.ToString());
  } catch (const std::exception &e) {
    return fail(error, error_size, e.what());
  }
  if (tfm_tokenizer_text_add(out, sp->text.data(), sp->text.size()) != 0)
    return fail(error, error_size, "out of memory");
  return 0;
}

extern "C" size_t tfm_tokenizer_sp_size(const tfm_tokenizer_sp *sp) {
  return (size_t)sp->processor.GetPieceSize();
}

extern "C" const char *tfm_tokenizer_sp_token(const tfm_tokenizer_sp *sp, int32_t id,
                                              size_t *length) {
  if (id < 0 || id >= sp->processor.GetPieceSize()) return nullptr;
  const std::string &piece = sp->processor.IdToPiece(id);
  if (length) *length = piece.size();
  return piece.c_str();
}

extern "C" int32_t tfm_tokenizer_sp_id(const tfm_tokenizer_sp *sp, const char *token,
                                       size_t length) {
  std::string piece(token, length);
  int id = sp->processor.PieceToId(piece);
  // PieceToId answers unk for any unknown piece: only the unknown piece itself is unk.
  if (id == sp->processor.unk_id() && sp->processor.IdToPiece(id) != piece) return -1;
  return id;
}

extern "C" tfm_tokenizer_specials tfm_tokenizer_sp_specials(const tfm_tokenizer_sp *sp) {
  tfm_tokenizer_specials s;
  s.bos = sp->processor.bos_id();
  s.eos = sp->processor.eos_id();
  s.pad = sp->processor.pad_id();
  s.unk = sp->processor.unk_id();
  return s;
}

extern "C" void tfm_tokenizer_sp_free(tfm_tokenizer_sp *sp) { delete sp; }

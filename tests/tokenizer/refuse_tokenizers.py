"""Broken tokenizer files are refused with "FILE: reason" and exit 1, never
a crash: truncated and mistyped tokenizer.json, merges naming unknown
tokens, bad vocab.txt and merges.txt lines, truncated and garbage
SentencePiece .model files, missing files.

  refuse_tokenizers.py TOKENIZE_IDS WORKDIR

The good tokenizer.json the broken ones start from is trained by tfm
itself (no package needed); a truncated real .model is added when the
sentencepiece package is installed."""
import json
import os
import subprocess
import sys

DRIVER, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = 0


def path(name):
    return os.path.join(WORK, name)


def write(name, data):
    p = path(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return p


def refuse(tokenizer, reason, shown=None):
    global failures
    p = subprocess.run([DRIVER, tokenizer, path("text.txt")], capture_output=True)
    err = p.stderr.decode(errors="replace").strip()
    shown = shown or tokenizer
    good = p.returncode == 1 and err.startswith(f"tokenize_ids: {shown}:") and reason in err
    print(f"{'ok  ' if good else 'FAIL'} exit {p.returncode}: {err}")
    if not good:
        print(f"     wanted exit 1 and '{shown}: ...{reason}...'")
        failures += 1


write("text.txt", "hello world, it's a test\n")
good = path("good.json")
write("train.txt", "hello world, it's a test\n" * 50)
subprocess.run([DRIVER, "--train", "300", good, path("train.txt")], check=True)
with open(good, encoding="utf-8") as f:
    text = f.read()
doc = json.loads(text)


def variant(name, change):
    d = json.loads(text)
    change(d)
    return write(name, json.dumps(d))


# tokenizer.json
refuse(write("truncated/tokenizer.json", text[: len(text) // 2]), "not valid JSON")
refuse(write("empty/tokenizer.json", ""), "not valid JSON")
refuse(write("array/tokenizer.json", "[]"), "not a tokenizer.json")
refuse(variant("nomodel.json", lambda d: d.pop("model")), "no \"model\"")
refuse(variant("type.json", lambda d: d["model"].update(type="Unigram")), "not supported")
refuse(variant("vocab_array.json", lambda d: d["model"].update(vocab=[1, 2])), "vocabulary is not an object")
refuse(variant("id_string.json", lambda d: d["model"]["vocab"].update(a="1")), "is not a token id")
refuse(variant("id_negative.json", lambda d: d["model"]["vocab"].update(a=-1)), "is not a token id")
refuse(variant("id_twice.json", lambda d: d["model"]["vocab"].update({"Ġx": 0})), "given twice")
refuse(variant("gap.json", lambda d: d["model"]["vocab"].update({"Ġzzz": 100000})), "past the vocabulary")
refuse(variant("gap2.json", lambda d: d["model"]["vocab"].update({"Ġzzz": len(doc["model"]["vocab"]) + 1})),
       "no token has id")
refuse(variant("merges_number.json", lambda d: d["model"].update(merges=7)), "merges is not an array")
refuse(variant("merge_unknown.json", lambda d: d["model"]["merges"].append(["Ġzz", "qq"])),
       "not in the vocabulary")
refuse(variant("merge_join.json", lambda d: d["model"]["merges"].append("h w")), "makes \"hw\"")
refuse(variant("merge_three.json", lambda d: d["model"]["merges"].append("a b c")), "not two tokens")
refuse(variant("merge_type.json", lambda d: d["model"]["merges"].append([1, 2])), "neither")
refuse(variant("added.json", lambda d: d.update(added_tokens={})), "not an array")
refuse(variant("added_id.json", lambda d: d["added_tokens"][0].update(id=3)), "not 3")
refuse(variant("pre.json", lambda d: d.update(pre_tokenizer=None)), "ByteLevel")
refuse(variant("norm.json", lambda d: d.update(normalizer={"type": "NFC"})), "normalizer")
refuse(variant("prefix.json", lambda d: d["pre_tokenizer"].update(add_prefix_space=1)), "true or false")
wp = {"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"a": 0}},
      "normalizer": None, "pre_tokenizer": {"type": "BertPreTokenizer"}}
refuse(write("wp_unk.json", json.dumps(wp)), "unk_token \"[UNK]\" is not in the vocabulary")
wp["pre_tokenizer"] = {"type": "Whitespace"}
refuse(write("wp_pre.json", json.dumps(wp)), "BertPreTokenizer")
# GPT-2's files
vocab = json.dumps(doc["model"]["vocab"])
refuse(write("gpt2a/vocab.json", vocab[:-3]), "not valid JSON")
write("gpt2b/vocab.json", vocab)
first = doc["model"]["merges"][0]
first = first if isinstance(first, str) else " ".join(first)
refuse(write("gpt2b/merges.txt", f"#version: 0.2\n{first}\nnot-two\n"), ":3: not two tokens")
write("gpt2c/vocab.json", vocab)
refuse(write("gpt2c/merges.txt", "#version: 0.2\nzzz q\n"), "not in the vocabulary")
refuse(write("lonely/vocab.json", vocab), "no \"model\"")
# vocab.txt
refuse(write("bert/vocab.txt", "[PAD]\n[UNK]\n\nhello\n"), ":3: an empty token")
refuse(write("bert2/vocab.txt", "[UNK]\nhello\nhello\n"), ":3: token \"hello\" is given twice")
refuse(write("bert3/vocab.txt", "hello\nworld\n"), "no [UNK] token")
refuse(write("bert4/vocab.txt", b"[UNK]\n\xff\xfe\n"), "not UTF-8")
# SentencePiece
refuse(write("garbage.model", b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 40), "")
refuse(write("empty.model", b""), "")
try:
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(input=path("text.txt"), model_prefix=path("sp"), vocab_size=30,
                                   minloglevel=2, hard_vocab_limit=False)
    with open(path("sp.model"), "rb") as f:
        model = f.read()
    refuse(write("truncated.model", model[: len(model) // 2]), "")
    refuse(write("truncated_more.model", model[:7]), "")
except ImportError:
    print("(the sentencepiece package is not installed: no real .model truncated)")
# Files that are not there, or not tokenizers
refuse(path("missing/tokenizer.json"), "No such file")
os.makedirs(path("nothing"), exist_ok=True)
refuse(path("nothing"), "no tokenizer.json")
refuse(write("notes.bin", "hello"), "not a tokenizer file")

print("ok" if not failures else f"FAIL: {failures} refusals wrong")
sys.exit(1 if failures else 0)

"""tfm's tokenizers (tests/tokenizer/tokenize_ids) against the reference
implementations, on a corpus this test writes (corpus.py) and with
reference tokenizers it trains there, so nothing is downloaded:

  check_tokenizers.py CASE TOKENIZE_IDS WORKDIR

CASE: bpe_json, bpe_files (vocab.json + merges.txt), wordpiece_json,
wordpiece_txt (vocab.txt), sentencepiece_bpe, sentencepiece_unigram,
train_bpe (tfm trains, Hugging Face's tokenizers loads it). Every line's
ids must equal the reference's; decode(encode(line)) must give the line
back (byte-level BPE, SentencePiece) or the reference's decode
(WordPiece). Prints a throughput ratio, tfm over the reference on one
thread (a figure, not a check). Exit 77 (skipped) when the reference
package is not installed."""
import json
import os
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

CASE, DRIVER, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
VOCAB = 8000


def need(module):
    try:
        return __import__(module)
    except ImportError:
        print(f"skipped: the Python package {module} is not installed (tools/test.sh installs it)")
        sys.exit(77)


def run(*args):
    p = subprocess.run([DRIVER, *args], capture_output=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: tokenize_ids {' '.join(args)}: exit {p.returncode}: "
                 f"{p.stderr.decode(errors='replace')}")
    return p.stdout.decode()


def tfm_encode(tokenizer, text_path):
    out = run("--json", tokenizer, text_path)
    return [json.loads(l) for l in out.split("\n")[:-1]]


def compare(name, tokenizer, lines, text_path, ref_ids, ref_decode, exact):
    got = tfm_encode(tokenizer, text_path)
    if len(got) != len(lines):
        sys.exit(f"FAIL: {name}: {len(got)} lines of output for {len(lines)} lines")
    same = sum(g["ids"] == r for g, r in zip(got, ref_ids))
    bad = [i for i, (g, r) in enumerate(zip(got, ref_ids)) if g["ids"] != r]
    for i in bad[:5]:
        print(f"line {i + 1}: {lines[i]!r}\n  tfm: {got[i]['ids'][:40]}\n  ref: {ref_ids[i][:40]}")
    print(f"{name}: ids equal on {same} of {len(lines)} lines")
    want = lines if exact else [ref_decode(r) for r in ref_ids]
    back = sum(g["text"] == w for g, w in zip(got, want))
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if g["text"] != w]
    for i in wrong[:5]:
        print(f"line {i + 1} decoded: {got[i]['text']!r}\n  want: {want[i]!r}")
    print(f"{name}: decode(encode(line)) {'is the line' if exact else 'is the reference decode'} "
          f"on {back} of {len(lines)} lines")
    return same == len(lines) and back == len(lines)


def throughput(name, tokenizer, text_path, lines, reference_encode):
    repeats = 3
    reference_encode(lines)  # warm
    start = time.perf_counter()
    for _ in range(repeats):
        reference_encode(lines)
    ref = time.perf_counter() - start
    out = run("--time", str(repeats + 1), tokenizer, text_path).split()
    ours = float(out[1]) * repeats / (repeats + 1)
    mb = sum(len(l.encode()) + 1 for l in lines) * repeats / 1e6
    print(f"{name}: throughput on one thread: tfm {mb / ours:.1f} MB/s, reference "
          f"{mb / ref:.1f} MB/s, ratio tfm/reference {ref / ours:.2f}")


def main():
    os.makedirs(WORK, exist_ok=True)
    text_path = os.path.join(WORK, "corpus.txt")
    lines = corpus.corpus()
    with open(text_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(l + "\n" for l in lines))
    ok = True
    if CASE in ("bpe_json", "bpe_files", "train_bpe"):
        tokenizers = need("tokenizers")
        if CASE == "train_bpe":
            path = os.path.join(WORK, "tfm_trained.json")
            start = time.perf_counter()
            run("--train", str(VOCAB), path, text_path)
            print(f"train_bpe: tfm trained {VOCAB} tokens on {os.path.getsize(text_path)} bytes "
                  f"in {time.perf_counter() - start:.2f} s")
            ref = tokenizers.Tokenizer.from_file(path)
            if ref.get_vocab_size() != VOCAB:
                print(f"train_bpe: {ref.get_vocab_size()} tokens, not {VOCAB}")
                ok = False
        else:
            ref = tokenizers.ByteLevelBPETokenizer()
            ref.train([text_path], vocab_size=VOCAB, min_frequency=2,
                      special_tokens=["<|endoftext|>"], show_progress=False)
            ref.save(os.path.join(WORK, "tokenizer.json"))
            ref.save_model(WORK)
            path = os.path.join(WORK, "tokenizer.json")
            if CASE == "bpe_files":
                path = os.path.join(WORK, "vocab.json")
                ref = tokenizers.ByteLevelBPETokenizer(path, os.path.join(WORK, "merges.txt"))
        ref_ids = [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)]
        ok &= compare(CASE, path, lines, text_path, ref_ids, None, True)
        throughput(CASE, path, text_path, lines, lambda ls: ref.encode_batch(ls, add_special_tokens=False))
    elif CASE in ("wordpiece_json", "wordpiece_txt"):
        tokenizers = need("tokenizers")
        ref = tokenizers.BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=True, lowercase=True)
        ref.train([text_path], vocab_size=VOCAB, show_progress=False,
                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        ref.save(os.path.join(WORK, "tokenizer.json"))
        ref.save_model(WORK)
        path = os.path.join(WORK, "tokenizer.json")
        if CASE == "wordpiece_txt":
            path = os.path.join(WORK, "vocab.txt")
            ref = tokenizers.BertWordPieceTokenizer(path, lowercase=True)
        ref_ids = [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)]
        ok &= compare(CASE, path, lines, text_path, ref_ids, ref.decode, False)
        throughput(CASE, path, text_path, lines, lambda ls: ref.encode_batch(ls, add_special_tokens=False))
    elif CASE.startswith("sentencepiece_"):
        spm = need("sentencepiece")
        model_type = CASE.split("_", 1)[1]
        prefix = os.path.join(WORK, model_type)
        # Identity normalization, spaces kept and bytes as a fallback: a line
        # comes back exactly from its ids.
        spm.SentencePieceTrainer.train(
            input=text_path, model_prefix=prefix, vocab_size=4000, model_type=model_type,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            byte_fallback=True, character_coverage=0.9995, num_threads=2,
            max_sentence_length=1 << 16, minloglevel=2)
        path = prefix + ".model"
        ref = spm.SentencePieceProcessor(model_file=path)
        ref_ids = ref.encode(lines)
        ok &= compare(CASE, path, lines, text_path, ref_ids, ref.decode, True)
        throughput(CASE, path, text_path, lines, lambda ls: ref.encode(ls, num_threads=1))
    else:
        sys.exit(f"unknown case {CASE}")
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

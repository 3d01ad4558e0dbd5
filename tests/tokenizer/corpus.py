"""A deterministic corpus of varied text for the tokenizer tests (no
download): Latin with accents (composed and decomposed), Greek, Cyrillic,
CJK, Korean, Arabic, Devanagari, Thai, emoji (with skin tones and joiners),
digits of several kinds, punctuation, long words (some over BERT's 100
characters), runs of spaces and tabs and other white space inside lines,
and the contractions GPT-2 splits off ('s 't 're 've 'm 'll 'd).

usage: corpus.py OUT [BYTES]   (default: 1.2 MB; lines end with '\\n')"""
import random
import sys

ENGLISH = ("the quick brown fox jumps over lazy dog model token vocabulary merge byte "
           "level pair rank cache attention layer weight gradient training corpus text "
           "language learning network compiler runtime kernel thread memory data").split()
LATIN = ("français naïve café façade niño señor Ångström über Straße São Paulo Øresund "
         "Dvořák Kraków Łódź Tiếng Việt crème brûlée déjà vu garçon Müller jalapeño "
         "ÉCOLE ÀÉÎÕÜ ħ ǅ İstanbul ﬁnance").split()
DECOMPOSED = ["e\u0301t\u00e9", "cafe\u0301", "n\u0303o", "A\u030angstro\u0308m", "o\u0323\u0302"]
GREEK = "Καλημέρα κόσμε Ελλάδα φιλοσοφία ΑΘΗΝΑ Σωκράτης λόγος ἀρχή ψυχῆς".split()
CYRILLIC = "Привет мир Москва Ёлка съешь же ещё этих мягких французских булок ПРАВДА".split()
CJK = ["中文分词测试", "日本語のテキスト", "東京都", "漢字", "한국어 문장", "カタカナ", "ひらがな",
       "北京欢迎你", "机器学习"]
OTHER = ["مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ქართული", "Հայերեն"]
EMOJI = ["😀", "🎉", "👍🏽", "🚀", "❤️", "👨‍👩‍👧", "🇫🇷", "✨", "🙂", "🔥"]
PUNCT = list("!?.,;:\"()[]{}<>/\\|@#$%^&*-_+=~`") + ["—", "–", "…", "«", "»", "„", "“", "”",
                                                  "‘", "’", "¿", "¡", "§", "°", "€", "£", "¥"]
SPACES = ["  ", "   ", "\t", "\t\t", " \t ", "\u00a0", "\u3000", "\u2003", "\r", "\u2028",
          "\u0085", "\v", "\f", "    "]
CONTRACTIONS = ["it's", "don't", "they're", "we've", "I'm", "you'll", "he'd", "can't",
                "O'Neil", "'s", "'t", "'re", "rock'n'roll", "IT'S", "isn''t"]


def number(r):
    kind = r.randrange(8)
    if kind == 0: return str(r.randrange(10 ** r.randrange(1, 12)))
    if kind == 1: return f"{r.uniform(-1000, 1000):.{r.randrange(1, 6)}f}"
    if kind == 2: return f"{r.randrange(1, 10)},{r.randrange(1000):03d},{r.randrange(1000):03d}"
    if kind == 3: return f"{r.randrange(1990, 2030)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}"
    if kind == 4: return r.choice(["²³", "½", "Ⅻ", "１２３", "٣٤٥", "३", "0x1F", "1e-9", "⅔"])
    if kind == 5: return "".join(r.choice("0123456789") for _ in range(r.randrange(20, 40)))
    if kind == 6: return f"{r.randrange(100)}%"
    return f"v{r.randrange(10)}.{r.randrange(10)}.{r.randrange(100)}"


def long_word(r):
    letters = "abcdefghijklmnopqrstuvwxyzéßø"
    return "".join(r.choice(letters) for _ in range(r.choice([25, 60, 99, 100, 101, 150])))


def piece(r):
    kind = r.randrange(100)
    if kind < 40: w = r.choice(ENGLISH)
    elif kind < 48: w = r.choice(LATIN)
    elif kind < 50: w = r.choice(DECOMPOSED)
    elif kind < 55: w = r.choice(GREEK)
    elif kind < 60: w = r.choice(CYRILLIC)
    elif kind < 65: w = r.choice(CJK)
    elif kind < 67: w = r.choice(OTHER)
    elif kind < 71: w = r.choice(EMOJI) * r.choice([1, 1, 2, 3])
    elif kind < 78: w = number(r)
    elif kind < 86: w = "".join(r.choice(PUNCT) for _ in range(r.choice([1, 1, 1, 2, 3, 5])))
    elif kind < 92: w = r.choice(CONTRACTIONS)
    elif kind < 93: w = long_word(r)
    else: w = r.choice(ENGLISH).capitalize() if r.random() < 0.5 else r.choice(ENGLISH).upper()
    return w


def line(r):
    out = []
    if r.random() < 0.05: out.append(r.choice(SPACES))
    for i in range(r.randrange(1, 30)):
        if i:
            s = r.random()
            out.append(" " if s < 0.8 else "" if s < 0.88 else r.choice(SPACES))
        out.append(piece(r))
    if r.random() < 0.05: out.append(r.choice(SPACES))
    return "".join(out)


def corpus(size=1_200_000, seed=26):
    r = random.Random(seed)
    lines, total = [], 0
    while total < size:
        text = line(r)
        if r.random() < 0.01: text = ""
        lines.append(text)
        total += len(text.encode()) + 1
    return lines


if __name__ == "__main__":
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1_200_000
    with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(l + "\n" for l in corpus(size)))

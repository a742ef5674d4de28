"""Synthetic sequence tasks, generated on the spot and deterministic from a seed.

The main task is *reversal*: the source is a random string of symbols and the
target is the same string backwards. It is the most extreme case of a target
language whose word order differs from the source: the first output token
depends on the last input token and the last output token on the first input
token, so nothing can be translated word by word as it streams in.
"""
from dataclasses import dataclass

import torch

PAD, BOS, EOS = 0, 1, 2
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")


class Vocab:
    """Token strings <-> integer ids, with <pad>=0, <bos>=1 and <eos>=2."""

    def __init__(self, symbols):
        symbols = list(symbols)
        if not symbols:
            raise ValueError("symbols: expected at least one symbol, got none")
        if len(set(symbols)) != len(symbols):
            raise ValueError("symbols: expected distinct symbols, got duplicates")
        clash = set(symbols) & set(SPECIAL_TOKENS)
        if clash:
            raise ValueError(f"symbols: {sorted(clash)} are reserved special tokens")
        self.tokens = list(SPECIAL_TOKENS) + symbols
        self.index = {tok: i for i, tok in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id = PAD, BOS, EOS
        self.first_symbol_id = len(SPECIAL_TOKENS)

    def __len__(self):
        return len(self.tokens)

    def encode(self, tokens):
        """A list of token strings -> a list of ids. Unknown tokens raise KeyError."""
        unknown = [t for t in tokens if t not in self.index]
        if unknown:
            known = " ".join(self.tokens[self.first_symbol_id:])
            raise KeyError(f"tokens: {unknown!r} are not in the vocabulary ({known})")
        return [self.index[t] for t in tokens]

    def decode(self, ids, stop_at_eos=True):
        """A sequence of ids -> token strings, dropping <pad>/<bos> and stopping at <eos>."""
        out = []
        for i in (ids.tolist() if torch.is_tensor(ids) else ids):
            if i == EOS and stop_at_eos:
                break
            if i in (PAD, BOS):
                continue
            out.append(self.tokens[i])
        return out


@dataclass
class Batch:
    """A padded batch of source/target pairs.

    src:         (B, Lx) int64, symbols then <pad>
    src_lengths: (B,)    int64, number of real source tokens
    tgt_in:      (B, Ly+1) int64, <bos> y_1 ... y_n <pad>...   (decoder input)
    tgt_out:     (B, Ly+1) int64, y_1 ... y_n <eos> <pad>...   (what to predict)
    """
    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    def to(self, device):
        return Batch(*(t.to(device) for t in (self.src, self.src_lengths, self.tgt_in, self.tgt_out)))

    def __len__(self):
        return self.src.shape[0]


def pad_sequences(sequences, pad_id=PAD):
    """Pad a list of 1-D int sequences into one (B, L_max) tensor.

    Returns (padded, lengths) with lengths of shape (B,).
    """
    if len(sequences) == 0:
        raise ValueError("sequences: expected at least one sequence, got an empty list")
    seqs = [torch.as_tensor(s) for s in sequences]
    for i, s in enumerate(seqs):
        if s.dim() != 1:
            raise ValueError(f"sequences[{i}]: expected a 1-D sequence, got shape {tuple(s.shape)}")
        if s.is_floating_point() or s.dtype == torch.bool:
            raise TypeError(f"sequences[{i}]: expected integer token ids, got dtype {s.dtype}")
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    padded = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        padded[i, : len(s)] = s.long()
    return padded, lengths


class ReversalTask:
    """Reverse a random string of symbols: "a b c d" -> "d c b a".

    num_symbols: size of the alphabet (letters a, b, c, ... by default)
    min_len, max_len: the range of source lengths that can be asked for
    seed: fixes every training batch and every held-out set
    """

    def __init__(self, num_symbols=20, min_len=5, max_len=50, seed=0):
        if not 2 <= num_symbols <= 26:
            raise ValueError(f"num_symbols: expected 2 to 26, got {num_symbols}")
        if not 1 <= min_len <= max_len:
            raise ValueError(f"min_len, max_len: expected 1 <= min_len <= max_len, got {min_len}, {max_len}")
        self.vocab = Vocab([chr(ord("a") + i) for i in range(num_symbols)])
        self.min_len, self.max_len, self.seed = min_len, max_len, seed
        self.generator = torch.Generator().manual_seed(seed)

    def target_for(self, source):
        """The target id list for a source id list (here: reversed)."""
        return list(reversed(source))

    def _check_length(self, name, length):
        if isinstance(length, bool) or not isinstance(length, int):
            raise TypeError(f"{name}: expected an int, got {type(length).__name__}")
        if not self.min_len <= length <= self.max_len:
            raise ValueError(f"{name}: expected a length from {self.min_len} to {self.max_len} "
                             f"(this task's min_len and max_len), got {length}")

    def _random_sources(self, batch_size, lengths, generator, same_length=False):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: expected a positive int, got {batch_size!r}")
        if lengths is None:
            lengths = (self.min_len, self.max_len)
        if isinstance(lengths, tuple):
            lo, hi = lengths
            self._check_length("lengths[0]", lo)
            self._check_length("lengths[1]", hi)
            if lo > hi:
                raise ValueError(f"lengths: expected (low, high) with low <= high, got {lengths}")
            lens = torch.randint(lo, hi + 1, (1 if same_length else batch_size,), generator=generator).tolist()
            lens = lens * batch_size if same_length else lens
        else:
            self._check_length("lengths", lengths)
            lens = [lengths] * batch_size
        first = self.vocab.first_symbol_id
        return [torch.randint(first, len(self.vocab), (n,), generator=generator).tolist() for n in lens]

    def make_batch(self, sources):
        """Build a Batch from a list of source id lists."""
        if len(sources) == 0:
            raise ValueError("sources: expected at least one source sequence, got none")
        for i, s in enumerate(sources):
            self._check_length(f"len(sources[{i}])", len(s))
        targets = [self.target_for(list(s)) for s in sources]
        src, src_lengths = pad_sequences(sources)
        tgt_in, _ = pad_sequences([[BOS] + t for t in targets])
        tgt_out, _ = pad_sequences([t + [EOS] for t in targets])
        return Batch(src, src_lengths, tgt_in, tgt_out)

    def sample(self, batch_size, lengths=None, same_length=False):
        """A fresh random training batch.

        lengths: None (uniform over min_len..max_len), an int (every sequence
        that long) or a (low, high) tuple (uniform, inclusive).
        same_length: draw one length for the whole batch, so that no time is
        spent on padding (training is then about twice as fast).
        """
        return self.make_batch(self._random_sources(batch_size, lengths, self.generator, same_length))

    def held_out(self, length, n=200):
        """A fixed evaluation set of n sources of one length.

        It is drawn from its own generator, seeded from (seed, length), so it is
        the same whatever training has drawn before.
        """
        self._check_length("length", length)
        generator = torch.Generator().manual_seed(10_007 * (self.seed + 1) + length)
        return self.make_batch(self._random_sources(n, length, generator))

    def encode_source(self, text):
        """'a b c' or ['a', 'b', 'c'] -> a one-example Batch."""
        tokens = text.split() if isinstance(text, str) else list(text)
        if not tokens:
            raise ValueError("text: expected at least one token, got an empty source")
        return self.make_batch([self.vocab.encode(tokens)])

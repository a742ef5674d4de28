"""Lesson 6's hidden tests catch the common mistakes (and pass the reference solution).

Each case takes a test cell's source from solutions/06_positional_encoding.ipynb,
runs it after the set-up cell and the solution cells, with one answer replaced
by a mistaken version, and expects it to fail.
"""


LESSON = "06_positional_encoding"


def _pe(angle_line, fill="pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)", positions="torch.arange(max_len)"):
    """A sinusoidal encoding (even d_model) with one line swapped for a mistake."""
    return f"""
        def sinusoidal_positional_encoding(max_len, d_model):
            t = ({positions}).double()[:, None]
            i = torch.arange(d_model // 2).double()[None, :]
            angles = {angle_line}
            pe = torch.zeros(max_len, d_model, dtype=torch.float64)
            {fill}
            return pe.float()
    """


CORRECT_PE = _pe("t / 10000 ** (2 * i / d_model)")

ALTERNATIVES = {
    # other correct ways to write it must pass
    "loops": ("test_sinusoidal", """
        def sinusoidal_positional_encoding(max_len, d_model):
            if d_model % 2:
                raise ValueError("d_model must be even")
            pe = torch.zeros(max_len, d_model)
            for t in range(max_len):
                for i in range(d_model // 2):
                    pe[t, 2 * i] = math.sin(t / 10000 ** (2 * i / d_model))
                    pe[t, 2 * i + 1] = math.cos(t / 10000 ** (2 * i / d_model))
            return pe
    """),
    "exp-log form in float32": ("test_sinusoidal", """
        def sinusoidal_positional_encoding(max_len, d_model):
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, d_model)
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
            return pe
    """),
    "even-only version that raises on odd d_model": ("test_sinusoidal", CORRECT_PE.replace(
        "t = (", "if d_model % 2:\n                raise ValueError('d_model must be even')\n            t = (")),
    "module indexing pe with an explicit batch axis": (
        "test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=True)
            def forward(self, x):
                if x.size(1) > self.pe.size(0):
                    raise ValueError("too long")
                return x + self.pe[None, : x.size(1), :]
    """),
}


MISTAKES = {
    "sin and cos swapped": ("test_sinusoidal", _pe(
        "t / 10000 ** (2 * i / d_model)", fill="pe[:, 0::2], pe[:, 1::2] = torch.cos(angles), torch.sin(angles)"),
            "sin and cos are swapped"),
    "base 1000 instead of 10000": ("test_sinusoidal", _pe("t / 1000 ** (2 * i / d_model)"), "t / 1000^(2i / d_model)"),
    "base e (torch.exp) instead of 10000": ("test_sinusoidal", _pe("t / torch.exp(2 * i / d_model)"),
        "t / e^(2i / d_model)"),
    "exponent i/d instead of 2i/d": ("test_sinusoidal", _pe("t / 10000 ** (i / d_model)"), "t / 10000^(i / d_model)"),
    "exponent 2i/d with i the column index": ("test_sinusoidal", _pe(
        "t / 10000 ** (2 * i / d_model)",
        fill="j = torch.arange(d_model).double()[None, :]\n"
             "            a = t / 10000 ** (2 * j / d_model)\n"
             "            pe = torch.where(j % 2 == 0, torch.sin(a), torch.cos(a))"),
                 "the exponent uses the column index j"),
    "multiplied instead of divided": ("test_sinusoidal", _pe("t * 10000 ** (2 * i / d_model)"),
        "t * 10000^(2i / d_model)"),
    "positions start at 1": ("test_sinusoidal", _pe("t / 10000 ** (2 * i / d_model)",
                                                      positions="torch.arange(1, max_len + 1)"),
                                                          "positions start at 1"),
    "sines in the first half, cosines in the second": ("test_sinusoidal", _pe(
        "t / 10000 ** (2 * i / d_model)",
        fill="pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)"),
            "the first half of the columns holds the sines"),
    # PositionalEncoding
    "module off by one position": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len + 1, d_model))
            def forward(self, x):
                if x.shape[1] > self.pe.shape[0] - 1:
                    raise ValueError("too long")
                return x + self.pe[1 : x.shape[1] + 1]
    """, "position t received pe[t + 1]"),
    "module with a trainable table": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model))
            def forward(self, x):
                if x.shape[1] > self.pe.shape[0]:
                    raise ValueError("too long")
                return x + self.pe[: x.shape[1]]
    """, "the table pe is an nn.Parameter"),
    "module returns the encoding only": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
            def forward(self, x):
                return self.pe[: x.shape[1]].expand_as(x)
    """, "the output does not contain x"),
    "module adds in place": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
            def forward(self, x):
                if x.shape[1] > self.pe.shape[0]:
                    raise ValueError("too long")
                x += self.pe[: x.shape[1]]
                return x
    """, "changed its input in place"),
    "module without the length check": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
            def forward(self, x):
                return x + self.pe[: x.shape[1]]
    """, ("on a sequence of length 13 raised", "not ValueError")),
    "module with a non-persistent buffer": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
            def forward(self, x):
                if x.shape[1] > self.pe.shape[0]:
                    raise ValueError("too long")
                return x + self.pe[: x.shape[1]]
    """, "persistent=False"),
}


def _shift(block, freq="1 / 10000 ** (2 * i / d_model)", guard=True):
    return f"""
        def shift_matrix(k, d_model):
            if {guard} and d_model % 2:
                raise ValueError("d_model must be even")
            m = torch.zeros(d_model, d_model)
            for i in range(d_model // 2):
                w = {freq}
                c, s = math.cos(w * k), math.sin(w * k)
                {block}
            return m
    """


_CORRECT_BLOCK = "m[2*i, 2*i], m[2*i, 2*i+1], m[2*i+1, 2*i], m[2*i+1, 2*i+1] = c, s, -s, c"
ALTERNATIVES["shift written out"] = ("test_shift_matrix", _shift(_CORRECT_BLOCK))
MISTAKES.update({
    "shift blocks transposed (M_-k)": ("test_shift_matrix", _shift(
        "m[2*i, 2*i], m[2*i, 2*i+1], m[2*i+1, 2*i], m[2*i+1, 2*i+1] = c, -s, s, c"), "shifts by -k"),
    "shift without the sine terms": ("test_shift_matrix", _shift(
        "m[2*i, 2*i], m[2*i+1, 2*i+1] = c, c"), "M_k is diagonal"),
    "shift with exponent i/d": ("test_shift_matrix", _shift(_CORRECT_BLOCK, freq="1 / 10000 ** (i / d_model)"),
        "1 / 10000^(i / d_model)"),
    "shift with the wrong base": ("test_shift_matrix", _shift(_CORRECT_BLOCK, freq="1 / 1000 ** (2 * i / d_model)"),
        "1 / 1000^(2i / d_model)"),
    "shift that accepts an odd d_model": ("test_shift_matrix", _shift(_CORRECT_BLOCK, guard=False),
        "shift_matrix(1, 7) returned without raising ValueError"),
    "shift matrix in float64": ("test_shift_matrix", """
        _solution_shift = shift_matrix
        def shift_matrix(k, d_model):
            return _solution_shift(k, d_model).double()
    """, "shift_matrix returned torch.float64"),
    "encoding in float64": ("test_sinusoidal", CORRECT_PE.replace("return pe.float()", "return pe"),
        "sinusoidal_positional_encoding returned torch.float64"),
    "module slicing the table by the batch size": ("test_positional_encoding_module", """
        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
            def forward(self, x):
                if x.shape[1] > self.pe.shape[0]:
                    raise ValueError("too long")
                return x + self.pe[: x.shape[0], None, :]
    """, "example b received pe[b] at every position"),
})
# charged once: the module's test loads a reference table into its buffer
MISTAKES["module that adds the encoding in place"] = ("test_positional_encoding_module", """
    class PositionalEncoding(PositionalEncoding):
        def forward(self, x):
            if x.shape[1] > self.pe.shape[0]:
                raise ValueError("too long")
            x += self.pe[: x.shape[1]]
            return x
""", "changed its input in place")
MISTAKES["module that detaches its output"] = ("test_positional_encoding_module", """
    class PositionalEncoding(PositionalEncoding):
        def forward(self, x):
            if x.shape[1] > self.pe.shape[0]:
                raise ValueError("too long")
            return (x + self.pe[: x.shape[1]]).detach()
""", "no gradient flows from the output back to x")
MISTAKES["encoding with sin and cos swapped"] = (
    "test_sinusoidal", _pe("t / 10000 ** (2 * i / d_model)",
                                           fill="pe[:, 0::2], pe[:, 1::2] = torch.cos(angles), torch.sin(angles)"),
                                               "sin and cos are swapped")


# More mistakes a student could make from the notebook alone (issue 55: at least five per exercise, each named)
MISTAKES.update({
    "exponent without parentheses (10000 ** (2 * i) / d_model)": (
        "test_sinusoidal", _pe("t / 10000 ** (2 * i) / d_model"), "the exponent needs parentheses"),
    "odd d_model raises a RuntimeError": (
        "test_sinusoidal", CORRECT_PE, ("an odd d_model, raised RuntimeError", "or raise a ValueError")),
})

# concept checks: wrong answers fail, the right answer in other forms passes
MISTAKES.update({
    "wavelength without the 2 pi": ("test_concept_wavelength", "wavelength_pair_2 = 10000 ** (4 / 8)",
        "leaves out the 2*pi"),
    "wavelength with the column index as i": ("test_concept_wavelength",
                                              "wavelength_pair_2 = 2 * math.pi * 10000 ** (2 * 4 / 8)",
                                                  "takes the column index 4 as i"),
    "wavelength with exponent i/d": ("test_concept_wavelength", "wavelength_pair_2 = 2 * math.pi * 10000 ** (2 / 8)",
        "uses the exponent i/d"),
    "frequency instead of wavelength": ("test_concept_wavelength", "wavelength_pair_2 = 1 / 10000 ** (4 / 8)",
        "that is the frequency omega_2"),
    "new position as good as a trained one": ("test_concept_new_positions", "accuracy_at_18 = 'a'",
        "position 5 was in every training sequence, position 18 in none"),
    "new position better": ("test_concept_new_positions", "accuracy_at_18 = 'c'",
        "a longer sequence does not teach the model anything about position 18"),
    "a letter that is not offered": ("test_concept_new_positions", "accuracy_at_18 = 'd'",
        "'d' is not one of the options"),
    "a number instead of a letter": ("test_concept_new_positions", "accuracy_at_18 = 0.1",
        "accuracy_at_18 is a number"),
    "the option's text instead of its letter": ("test_concept_new_positions", "accuracy_at_18 = 'about chance, 10%'",
        "accuracy_at_18 is a phrase, not one of the letters"),
    "wavelength of pair 0": ("test_concept_wavelength", "wavelength_pair_2 = 2 * math.pi",
        "that is the wavelength of pair 0"),
    "half a turn": ("test_concept_wavelength", "wavelength_pair_2 = math.pi * 10000 ** (4 / 8)", "that is half a turn"),
})
ALTERNATIVES.update({
    "wavelength rounded": ("test_concept_wavelength", "wavelength_pair_2 = 628.32"),
    "wavelength measured from the encoding": ("test_concept_wavelength", """
        wavelength_pair_2 = 2 * math.pi / math.atan2(float(sinusoidal_positional_encoding(2, 8)[1, 4]),
                                                     float(sinusoidal_positional_encoding(2, 8)[1, 5]))
    """),
    "letter in capitals with spaces": ("test_concept_new_positions", "accuracy_at_18 = ' B '"),
})

"""Lesson 7's hidden tests catch the common mistakes and pass other correct styles.

Each case takes a test cell's source from solutions/07_transformer.ipynb and runs
it after the set-up cell, the ready-made MultiHeadAttention cell and the
solution cells, with one answer replaced.
"""

LESSON = "07_transformer"

_ENCODER_BLOCK = """
    class EncoderBlock(nn.Module):
        def __init__(self, d_model, num_heads, d_ff):
            super().__init__()
            self.norm1 = nn.LayerNorm(d_model)
            self.self_attn = MultiHeadAttention(d_model, num_heads)
            self.norm2 = nn.LayerNorm(d_model)
            self.ffn = FeedForward(d_model, d_ff)

        def forward(self, x, mask=None):
            h = self.norm1(x)
            x = x + self.self_attn(h, h, mask)[0]
            return x + self.ffn(self.norm2(x))
"""

_DECODER_BLOCK = """
    class DecoderBlock(nn.Module):
        def __init__(self, d_model, num_heads, d_ff):
            super().__init__()
            self.norm1 = nn.LayerNorm(d_model)
            self.self_attn = MultiHeadAttention(d_model, num_heads)
            self.norm2 = nn.LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(d_model, num_heads)
            self.norm3 = nn.LayerNorm(d_model)
            self.ffn = FeedForward(d_model, d_ff)

        def forward(self, y, memory, self_mask=None, memory_mask=None):
            h = self.norm1(y)
            y = y + self.self_attn(h, h, self_mask)[0]
            y = y + self.cross_attn(self.norm2(y), memory, memory_mask)[0]
            return y + self.ffn(self.norm3(y))
"""

_TRANSFORMER = """
    class Transformer(nn.Module):
        def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=64):
            super().__init__()
            self.max_len = max_len
            self.embed = nn.Embedding(vocab_size, d_model)
            self.position = nn.Embedding(max_len, d_model)
            self.encoder_blocks = nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))
            self.encoder_norm = nn.LayerNorm(d_model)
            self.decoder_blocks = nn.ModuleList(DecoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))
            self.decoder_norm = nn.LayerNorm(d_model)
            self.out = nn.Linear(d_model, vocab_size)

        def encode(self, src, src_lengths):
            positions = torch.arange(src.shape[1])
            src_mask = (positions[None, :] < src_lengths[:, None])[:, None, :]
            x = self.embed(src) + self.position(positions)
            for block in self.encoder_blocks:
                x = block(x, src_mask)
            return self.encoder_norm(x), src_mask

        def decode(self, tgt_in, memory, src_mask):
            positions = torch.arange(tgt_in.shape[1])
            causal = torch.ones(len(positions), len(positions), dtype=torch.bool).tril()
            y = self.embed(tgt_in) + self.position(positions)
            for block in self.decoder_blocks:
                y = block(y, memory, causal, src_mask)
            return self.out(self.decoder_norm(y))

        def forward(self, src, src_lengths, tgt_in):
            return self.decode(tgt_in, *self.encode(src, src_lengths))
"""

_GPT = """
    class TinyGPT(nn.Module):
        def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=64):
            super().__init__()
            self.max_len = max_len
            self.embed = nn.Embedding(vocab_size, d_model)
            self.position = nn.Embedding(max_len, d_model)
            self.blocks = nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))
            self.norm = nn.LayerNorm(d_model)
            self.out = nn.Linear(d_model, vocab_size)

        def forward(self, ids):
            L = ids.shape[1]
            causal = torch.ones(L, L, dtype=torch.bool).tril()
            x = self.embed(ids) + self.position(torch.arange(L))
            for block in self.blocks:
                x = block(x, causal)
            return self.out(self.norm(x))
"""

_SAMPLE = """
    @torch.no_grad()
    def sample(model, prompt, num_tokens, temperature=1.0, generator=None):
        ids = prompt
        for _ in range(num_tokens):
            logits = model(ids)[:, -1] / temperature
            next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            ids = torch.cat([ids, next_token], dim=1)
        return ids
"""


def _swap(source, old, new):
    assert old in source, old
    return source.replace(old, new)


_TOP_K = """
    def top_k_probabilities(logits, k, temperature=1.0):
        scaled = logits / temperature
        kth_largest = scaled.topk(k, dim=-1).values[:, -1:]
        return torch.softmax(scaled.masked_fill(scaled < kth_largest, float("-inf")), dim=-1)
"""

_TOP_P = """
    def top_p_probabilities(logits, p, temperature=1.0):
        probabilities = torch.softmax(logits / temperature, dim=-1)
        sorted_probabilities, order = probabilities.sort(dim=-1, descending=True)
        mass_before = sorted_probabilities.cumsum(dim=-1) - sorted_probabilities
        keep = torch.zeros_like(probabilities, dtype=torch.bool).scatter(-1, order, mass_before < p)
        kept = probabilities * keep
        return kept / kept.sum(dim=-1, keepdim=True)
"""


MISTAKES = {
    # FeedForward
    "feed-forward without the non-linearity": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                return self.linear2(self.linear1(x))
    """, "no non-linearity"),
    "feed-forward mixing positions": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                h = F.relu(self.linear1(x))
                return self.linear2(h + h.mean(dim=1, keepdim=True))
    """, "works on each position separately"),
    "feed-forward with GELU instead of ReLU": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                return self.linear2(F.gelu(self.linear1(x)))
    """, "uses GELU"),
    "feed-forward computed under torch.no_grad (no gradient reaches its weights)": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                with torch.no_grad():
                    return self.linear2(F.relu(self.linear1(x)))
    """, ("not connected to the weights", "torch.no_grad()")),
    "feed-forward with dropout (every call in training mode differs)": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
                self.dropout = nn.Dropout(0.1)

            def forward(self, x):
                return self.linear2(self.dropout(F.relu(self.linear1(x))))
    """, ("different outputs", "a dropout?")),
    "feed-forward with a ReLU after linear2 as well": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                return F.relu(self.linear2(F.relu(self.linear1(x))))
    """, "ReLU after linear2"),
    "feed-forward with other attribute names": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

            def forward(self, x):
                return self.fc2(F.relu(self.fc1(x)))
    """, ("parameters missing", "fc1.weight", "use exactly the attributes")),
    # EncoderBlock
    "residual added after the norm (post-LN)": ("test_encoder_block", _swap(_swap(
        _ENCODER_BLOCK, "h = self.norm1(x)\n            x = x + self.self_attn(h, h, mask)[0]",
        "x = self.norm1(x + self.self_attn(x, x, mask)[0])"),
        "return x + self.ffn(self.norm2(x))", "return self.norm2(x + self.ffn(x))"), "is post-LN"),
    "residual taken from the normalised input": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "x = x + self.self_attn(h, h, mask)[0]", "x = h + self.self_attn(h, h, mask)[0]"),
        "to LN1(x), the normalised input"),
    "no residual around the feed-forward network": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "return x + self.ffn(self.norm2(x))", "return self.ffn(self.norm2(x))"),
        "no residual around the feed-forward"),
    "one LayerNorm for both sublayers": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "return x + self.ffn(self.norm2(x))", "return x + self.ffn(self.norm1(x))"),
        "feed-forward network's input with norm1"),
    "mask not passed to the attention": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "self.self_attn(h, h, mask)", "self.self_attn(h, h)"), "ignores the mask"),
    "in-place residual add that breaks the backward pass": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "return x + self.ffn(self.norm2(x))", "x += self.ffn(self.norm2(x))\n            return x"),
        ("in-place change", "not x += y")),
    "attention weights added to the stream instead of its output": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "x = x + self.self_attn(h, h, mask)[0]", "x = x + self.self_attn(h, h, mask)[1].mean(1) @ h"),
        "adds the attention weights"),
    "LayerNorm applied to the sublayers' outputs instead of their inputs": ("test_encoder_block", _swap(_swap(
        _ENCODER_BLOCK, "h = self.norm1(x)\n            x = x + self.self_attn(h, h, mask)[0]",
        "x = x + self.norm1(self.self_attn(x, x, mask)[0])"),
        "return x + self.ffn(self.norm2(x))", "return x + self.norm2(self.ffn(x))"),
        "normalises the sublayers' outputs"),
    # DecoderBlock
    "cross-attention keys and values from the decoder": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "self.cross_attn(self.norm2(y), memory, memory_mask)",
        "self.cross_attn(self.norm2(y), self.norm2(y))"), "keys and values from the decoder's own stream"),
    "cross-attention ignoring the encoder's padding mask": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "self.cross_attn(self.norm2(y), memory, memory_mask)", "self.cross_attn(self.norm2(y), memory)"),
        "ignores memory_mask"),
    "cross-attention queries from the memory": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "self.cross_attn(self.norm2(y), memory, memory_mask)[0]",
        "self.cross_attn(memory, self.norm2(y))[0].mean(dim=1, keepdim=True)"), "queries from the memory"),
    "memory normalised again by norm2": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "self.cross_attn(self.norm2(y), memory, memory_mask)",
        "self.cross_attn(self.norm2(y), self.norm2(memory), memory_mask)"), "normalises the memory again"),
    "decoder self-attention without its mask": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "self.self_attn(h, h, self_mask)", "self.self_attn(h, h)"), "self-attention ignores self_mask"),
    "self_mask and memory_mask swapped": ("test_decoder_block", _swap(_swap(
        _DECODER_BLOCK, "self.self_attn(h, h, self_mask)", "self.self_attn(h, h, memory_mask)"),
        "self.cross_attn(self.norm2(y), memory, memory_mask)", "self.cross_attn(self.norm2(y), memory, self_mask)"),
        "passes self_mask to the cross-attention and memory_mask to the self-attention"),
    "cross-attention before self-attention": ("test_decoder_block", _swap(
        _DECODER_BLOCK, """            h = self.norm1(y)
            y = y + self.self_attn(h, h, self_mask)[0]
            y = y + self.cross_attn(self.norm2(y), memory, memory_mask)[0]
""", """            y = y + self.cross_attn(self.norm2(y), memory, memory_mask)[0]
            h = self.norm1(y)
            y = y + self.self_attn(h, h, self_mask)[0]
"""), "cross-attention before the self-attention"),
    "in-place residual add in the decoder block": ("test_decoder_block", _swap(
        _DECODER_BLOCK, "return y + self.ffn(self.norm3(y))", "y += self.ffn(self.norm3(y))\n            return y"),
        ("in-place change", "not x += y")),
    "decoder block post-LN": ("test_decoder_block", _swap(_swap(_swap(
        _DECODER_BLOCK, "h = self.norm1(y)\n            y = y + self.self_attn(h, h, self_mask)[0]",
        "y = self.norm1(y + self.self_attn(y, y, self_mask)[0])"),
        "y = y + self.cross_attn(self.norm2(y), memory, memory_mask)[0]",
        "y = self.norm2(y + self.cross_attn(y, memory, memory_mask)[0])"),
        "return y + self.ffn(self.norm3(y))", "return self.norm3(y + self.ffn(y))"), "is post-LN"),
    # Transformer
    "no causal mask in the decoder": ("test_transformer", _swap(
        _TRANSFORMER, "y = block(y, memory, causal, src_mask)", "y = block(y, memory, None, src_mask)"),
        ("earlier target positions changed", "causal mask")),
    "encoder padding mask ignored in the encoder": ("test_transformer", _swap(
        _TRANSFORMER, "x = block(x, src_mask)", "x = block(x)"),
        ("memory at the real source tokens changed", "to every encoder block")),
    "encoder padding mask ignored in the cross-attention": ("test_transformer", _swap(
        _TRANSFORMER, "y = block(y, memory, causal, src_mask)", "y = block(y, memory, causal)"),
        ("padded source slots changed", "memory_mask")),
    "padding mask inverted": ("test_transformer", _swap(
        _TRANSFORMER, "src_mask = (positions[None, :] < src_lengths[:, None])[:, None, :]",
        "src_mask = (positions[None, :] >= src_lengths[:, None])[:, None, :]"), "it is inverted"),
    "padding mask from the PAD tokens instead of the lengths": ("test_transformer", _swap(
        _TRANSFORMER, "src_mask = (positions[None, :] < src_lengths[:, None])[:, None, :]",
        "src_mask = (src != PAD)[:, None, :]"), "from the tokens (src != PAD)"),
    "padding mask off by one": ("test_transformer", _swap(
        _TRANSFORMER, "src_mask = (positions[None, :] < src_lengths[:, None])[:, None, :]",
        "src_mask = (positions[None, :] < src_lengths[:, None] - 1)[:, None, :]"), "leaves out the last real token"),
    "no positions in the decoder": ("test_transformer", _swap(
        _TRANSFORMER, "y = self.embed(tgt_in) + self.position(positions)", "y = self.embed(tgt_in)"),
        "decoder adds no positions"),
    "no positions in the encoder": ("test_transformer", _swap(
        _TRANSFORMER, "x = self.embed(src) + self.position(positions)", "x = self.embed(src)"),
        "encoder adds no positions"),
    "decoder reads the raw embeddings, not the encoder's output": ("test_transformer", _swap(
        _TRANSFORMER, "y = block(y, memory, causal, src_mask)", "y = block(y, self.embed(tgt_in) * 0, causal)"),
        ("do not change when the source changes", "memory")),
    "decoder causal mask that also hides each position from itself": ("test_transformer", _swap(
        _TRANSFORMER, "causal = torch.ones(len(positions), len(positions), dtype=torch.bool).tril()",
        "causal = torch.ones(len(positions), len(positions), dtype=torch.bool).tril(diagonal=-1)"),
        "hides each position from itself"),
    "encoder_norm left out": ("test_transformer", _swap(
        _TRANSFORMER, "return self.encoder_norm(x), src_mask", "return x, src_mask"), "without encoder_norm"),
    "decoder_norm left out": ("test_transformer", _swap(
        _TRANSFORMER, "return self.out(self.decoder_norm(y))", "return self.out(y)"), "without decoder_norm"),
    "one encoder block object repeated": ("test_transformer", _swap(
        _TRANSFORMER, "nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))",
        "nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff)] * num_layers)"),
        "encoder_blocks holds one EncoderBlock object several times"),
    "one decoder block object repeated": ("test_transformer", _swap(
        _TRANSFORMER, "nn.ModuleList(DecoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))",
        "nn.ModuleList([DecoderBlock(d_model, num_heads, d_ff)] * num_layers)"),
        "decoder_blocks holds one DecoderBlock object several times"),
    "memory taken before the last encoder block": ("test_transformer", _swap(
        _TRANSFORMER, "for block in self.encoder_blocks:\n                x = block(x, src_mask)",
        "for block in self.encoder_blocks[:-1]:\n                x = block(x, src_mask)"),
        "skips the last encoder block"),
    "decoder output detached (no gradient reaches the encoder)": ("test_transformer", _swap(
        _TRANSFORMER, "return self.decode(tgt_in, *self.encode(src, src_lengths))",
        "memory, src_mask = self.encode(src, src_lengths)\n"
        "            return self.decode(tgt_in, memory.detach(), src_mask)"),
        ("no gradient reaches the encoder", ".detach()")),
    # greedy_decode
    "greedy decoding that keeps <bos>": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(max_len - 1):
                ys = torch.cat([ys, model.decode(ys, memory, src_mask)[:, -1].argmax(-1)[:, None]], dim=1)
            return ys
    """, "starts with <bos>"),
    "greedy decoding from the first position's logits": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(max_len):
                ys = torch.cat([ys, model.decode(ys, memory, src_mask)[:, 0].argmax(-1)[:, None]], dim=1)
            return ys[:, 1:]
    """, "first position's logits"),
    "greedy decoding that stops at the first <eos> of any row": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(max_len):
                ys = torch.cat([ys, model.decode(ys, memory, src_mask)[:, -1].argmax(-1)[:, None]], dim=1)
                if (ys == EOS).any():
                    break
            return ys[:, 1:]
    """, ("stopped as soon as row", "until every row")),
    "greedy decoding that feeds the decoder only the last token": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(max_len):
                next_token = model.decode(ys[:, -1:], memory, src_mask)[:, -1].argmax(dim=-1)
                ys = torch.cat([ys, next_token[:, None]], dim=1)
                if (ys == EOS).any(dim=1).all():
                    break
            return ys[:, 1:]
    """, "decodes only the last token"),
    "greedy decoding that starts from zeros (PAD) instead of BOS": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.zeros((src.shape[0], 1), dtype=torch.long)
            for _ in range(max_len):
                next_token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)
                ys = torch.cat([ys, next_token[:, None]], dim=1)
                if (ys == EOS).any(dim=1).all():
                    break
            return ys[:, 1:]
    """, "starts from token 0 (<pad>)"),
    "greedy decoding that writes one token fewer than max_len": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            memory, src_mask = model.encode(src, src_lengths)
            ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(max_len - 1):
                next_token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)
                ys = torch.cat([ys, next_token[:, None]], dim=1)
                if (ys == EOS).any(dim=1).all():
                    break
            return ys[:, 1:]
    """, "one fewer than max_len"),
    # TinyGPT
    "GPT without the causal mask": ("test_tiny_gpt", _swap(_GPT, "x = block(x, causal)", "x = block(x)"),
    "get no causal mask"),
    "GPT without positions": ("test_tiny_gpt", _swap(
        _GPT, "x = self.embed(ids) + self.position(torch.arange(L))", "x = self.embed(ids)"), "adds no positions"),
    "GPT mask off by one (a token sees the next one)": ("test_tiny_gpt", _swap(
        _GPT, "causal = torch.ones(L, L, dtype=torch.bool).tril()",
        "causal = torch.ones(L, L, dtype=torch.bool).tril(diagonal=1)"), "see the next token too"),
    "GPT causal mask that also hides each position from itself": ("test_tiny_gpt", _swap(
        _GPT, "causal = torch.ones(L, L, dtype=torch.bool).tril()",
        "causal = torch.ones(L, L, dtype=torch.bool).tril(diagonal=-1)"), "hides each position from itself"),
    "GPT final norm left out": ("test_tiny_gpt", _swap(_GPT, "return self.out(self.norm(x))", "return self.out(x)"),
    "without the final norm"),
    "GPT with one block object repeated": ("test_tiny_gpt", _swap(
        _GPT, "nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers))",
        "nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff)] * num_layers)"),
        "holds one EncoderBlock object several times"),
    "GPT with the last block left out": ("test_tiny_gpt", _swap(
        _GPT, "for block in self.blocks:", "for block in self.blocks[:-1]:"), "skips the last block"),
    # next_token_loss
    "loss without the shift": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
    """, "logits[:, t] with ids[:, t]"),
    "loss shifted the wrong way": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            return F.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]), ids[:, :-1].reshape(-1))
    """, "shifted the wrong way"),
    "loss summed instead of averaged": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                   reduction="sum")
    """, ("the sum over", "not their mean")),
    "loss turned into a number (no gradient)": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            return torch.tensor(loss.item())
    """, ("not connected to the logits", ".item()")),
    "loss on the softmax of the logits": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            probabilities = torch.softmax(logits[:, :-1], dim=-1)
            return F.cross_entropy(probabilities.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    """, "applies softmax before F.cross_entropy"),
    "loss with log_softmax over the positions": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            log_probs = torch.log_softmax(logits[:, :-1], dim=1)
            return -log_probs.gather(-1, ids[:, 1:].unsqueeze(-1)).mean()
    """, "log_softmax runs over the positions"),
    "loss with the logits given to cross_entropy unflattened": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            return F.cross_entropy(logits[:, :-1], ids[:, 1:])
    """, "reads the classes from dim 1"),
    # sample
    "temperature multiplied instead of divided": ("test_sample", _swap(
        _SAMPLE, "logits = model(ids)[:, -1] / temperature", "logits = model(ids)[:, -1] * temperature"),
        "softmax(logits * temperature)"),
    "temperature applied after the softmax": ("test_sample", _swap(
        _SAMPLE, "torch.multinomial(torch.softmax(logits, dim=-1), 1",
        "torch.multinomial(torch.softmax(model(ids)[:, -1], dim=-1) / temperature, 1"),
        ("as if the temperature were 1", "dividing the probabilities")),
    "always the argmax": ("test_sample", _swap(
        _SAMPLE, "next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
        "next_token = logits.argmax(-1, keepdim=True)"), "every draw is the most likely token"),
    "generator ignored": ("test_sample", _swap(_SAMPLE, ", generator=generator)", ")"),
    ("gave different tokens", "generator=generator")),
    "sampling from the first position": ("test_sample", _swap(
        _SAMPLE, "logits = model(ids)[:, -1] / temperature", "logits = model(ids)[:, 0] / temperature"),
        "first position's logits"),
    "sample returning only the new tokens": ("test_sample", """
        @torch.no_grad()
        def sample(model, prompt, num_tokens, temperature=1.0, generator=None):
            ids = prompt
            for _ in range(num_tokens):
                logits = model(ids)[:, -1] / temperature
                next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
                ids = torch.cat([ids, next_token], dim=1)
            return ids[:, prompt.shape[1]:]
    """, "only the 5 new tokens"),
    "sampling with the softmax over the batch": ("test_sample", _swap(
        _SAMPLE, "torch.softmax(logits, dim=-1)", "torch.softmax(logits, dim=0)"), ("uniform", "dim 0")),
    # top_k_probabilities
    "top-k keeping k + 1 tokens": ("test_top_k", _swap(
        _TOP_K, "scaled.topk(k, dim=-1).values[:, -1:]", "scaled.topk(min(k + 1, scaled.shape[-1]), dim=-1).values[:, -1:]"),
        "keep k + 1 tokens"),
    "top-k keeping k - 1 tokens": ("test_top_k", _swap(
        _TOP_K, "scaled.masked_fill(scaled < kth_largest", "scaled.masked_fill(scaled <= kth_largest"),
        "keep k - 1 tokens"),
    "top-k not renormalised": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            probabilities = torch.softmax(logits / temperature, dim=-1)
            kth_largest = probabilities.topk(k, dim=-1).values[:, -1:]
            return probabilities * (probabilities >= kth_largest)
    """, "not renormalised"),
    "top-k with the temperature ignored": ("test_top_k", _swap(
        _TOP_K, "scaled = logits / temperature", "scaled = logits"), "ignore the temperature"),
    "top-k with the temperature multiplied": ("test_top_k", _swap(
        _TOP_K, "scaled = logits / temperature", "scaled = logits * temperature"), "logits * temperature"),
    "top-k probabilities left in sorted order": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            values = (logits / temperature).sort(dim=-1, descending=True).values
            values[:, k:] = float("-inf")
            return torch.softmax(values, dim=-1)
    """, "in sorted order"),
    "top-k cut to zero logits instead of -inf": ("test_top_k", _swap(
        _TOP_K, 'scaled < kth_largest, float("-inf")', "scaled < kth_largest, 0.0"), "dropped logits to 0"),
    "top-k over the whole batch instead of each row": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            scaled = logits / temperature
            kth_largest = scaled.flatten().topk(k).values[-1]
            return torch.softmax(scaled.masked_fill(scaled < kth_largest, float("-inf")), dim=-1)
    """, "mixes the rows"),
    "top-k changing the logits in place": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            logits /= temperature
            kth_largest = logits.topk(k, dim=-1).values[:, -1:]
            return torch.softmax(logits.masked_fill(logits < kth_largest, float("-inf")), dim=-1)
    """, "changed its input in place"),
    # top_p_probabilities
    "top-p dropping the token that crosses p": ("test_top_p", _swap(
        _TOP_P, "mass_before < p", "sorted_probabilities.cumsum(dim=-1) < p"),
        "drops the token whose probability carries the running sum across p"),
    "top-p keeping one token too many": ("test_top_p", _swap(
        _TOP_P, "mass_before < p", "(mass_before - sorted_probabilities.roll(1, -1) * (mass_before > 0)) < p"),
        "one token past the one that crosses p"),
    "top-p choosing the nucleus before the temperature": ("test_top_p", _swap(
        _TOP_P, "sorted_probabilities, order = probabilities.sort(dim=-1, descending=True)",
        "sorted_probabilities, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)"),
        "chosen from softmax(logits), before the temperature"),
    "top-p with the temperature ignored": ("test_top_p", _swap(
        _TOP_P, "probabilities = torch.softmax(logits / temperature, dim=-1)",
        "probabilities = torch.softmax(logits, dim=-1)"), "ignore the temperature"),
    "top-p not renormalised": ("test_top_p", _swap(
        _TOP_P, "return kept / kept.sum(dim=-1, keepdim=True)", "return kept"), "not renormalised"),
    "top-p with running sums in vocabulary order (no sort)": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            probabilities = torch.softmax(logits / temperature, dim=-1)
            keep = (probabilities.cumsum(dim=-1) - probabilities) < p
            kept = probabilities * keep
            return kept / kept.sum(dim=-1, keepdim=True)
    """, "vocabulary's order"),
    "top-p sorted from the least likely up": ("test_top_p", _swap(
        _TOP_P, "probabilities.sort(dim=-1, descending=True)", "probabilities.sort(dim=-1)"),
        ("keeps every token", "descending=True")),
    "top-p left in sorted order": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            sorted_probabilities = torch.softmax(logits / temperature, dim=-1).sort(dim=-1, descending=True).values
            kept = sorted_probabilities * ((sorted_probabilities.cumsum(dim=-1) - sorted_probabilities) < p)
            return kept / kept.sum(dim=-1, keepdim=True)
    """, "left in sorted order"),
    "top-p keeping the tokens with probability at least p": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            probabilities = torch.softmax(logits / temperature, dim=-1)
            kept = probabilities * (probabilities >= probabilities.max(dim=-1, keepdim=True).values * (1 - p))
            return kept / kept.sum(dim=-1, keepdim=True)
    """, "within a factor (1 - p)"),
}

ALTERNATIVES = {
    "feed-forward with an in-place ReLU": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1 = nn.Linear(d_model, d_ff)
                self.linear2 = nn.Linear(d_ff, d_model)

            def forward(self, x):
                return self.linear2(F.relu(self.linear1(x), inplace=True))
    """),
    "encoder block with PyTorch-style helper methods and keyword arguments": ("test_encoder_block", """
        class EncoderBlock(nn.Module):
            def __init__(self, d_model, num_heads, d_ff):
                super().__init__()
                self.norm1 = nn.LayerNorm(d_model)
                self.self_attn = MultiHeadAttention(d_model, num_heads)
                self.norm2 = nn.LayerNorm(d_model)
                self.ffn = FeedForward(d_model, d_ff)

            def _sa_block(self, x, mask):
                return self.self_attn(query=x, key_value=x, mask=mask)[0]

            def forward(self, x, mask=None):
                x = x + self._sa_block(self.norm1(x), mask)
                x = x + self.ffn(self.norm2(x))
                return x
    """),
    "Transformer that zeroes the padded memory rows": ("test_transformer", _swap(
        _TRANSFORMER, "return self.encoder_norm(x), src_mask",
        "memory = self.encoder_norm(x)\n"
        "            memory.masked_fill_(~src_mask.transpose(1, 2), 0.0)\n"
        "            return memory, src_mask")),
    "GPT with the mask built by triu and negation": ("test_tiny_gpt", _swap(
        _GPT, "causal = torch.ones(L, L, dtype=torch.bool).tril()",
        "causal = ~torch.ones(L, L, dtype=torch.bool).triu(diagonal=1)")),
    "loss in float64": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            return F.cross_entropy(logits[:, :-1].double().flatten(0, 1), ids[:, 1:].flatten())
    """),
    "feed-forward as an explicit formula": ("test_feed_forward", """
        class FeedForward(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.linear1 = nn.Linear(d_model, d_ff)
                self.linear2 = nn.Linear(d_ff, d_model)

            def forward(self, x):
                hidden = torch.clamp(x @ self.linear1.weight.T + self.linear1.bias, min=0)
                return hidden @ self.linear2.weight.T + self.linear2.bias
    """),
    "encoder block with the mask reshaped to (B, L, L) first": ("test_encoder_block", _swap(
        _ENCODER_BLOCK, "h = self.norm1(x)\n",
        "h = self.norm1(x)\n            if mask is not None:\n"
        "                mask = mask.expand(x.shape[0], x.shape[1], x.shape[1])\n")),
    "decoder block with named intermediate results": ("test_decoder_block", """
        class DecoderBlock(nn.Module):
            def __init__(self, d_model, num_heads, d_ff):
                super().__init__()
                self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
                self.self_attn = MultiHeadAttention(d_model, num_heads)
                self.cross_attn = MultiHeadAttention(d_model, num_heads)
                self.ffn = FeedForward(d_model, d_ff)

            def forward(self, y, memory, self_mask=None, memory_mask=None):
                attended, _ = self.self_attn(self.norm1(y), self.norm1(y), mask=self_mask)
                after_self = y + attended
                read, _ = self.cross_attn(self.norm2(after_self), memory, mask=memory_mask)
                after_cross = after_self + read
                return after_cross + self.ffn(self.norm3(after_cross))
    """),
    "Transformer with a (B, L_x) mask broadcast in the blocks": ("test_transformer", _swap(_swap(
        _TRANSFORMER, "x = block(x, src_mask)", "x = block(x, src_mask.view(src.shape[0], 1, -1))"),
        "positions = torch.arange(src.shape[1])\n", "positions = torch.arange(src.shape[1], dtype=torch.long)\n")),
    "Transformer with a masked_fill causal mask built by comparison": ("test_transformer", _swap(
        _TRANSFORMER, "causal = torch.ones(len(positions), len(positions), dtype=torch.bool).tril()",
        "causal = positions[None, :] <= positions[:, None]")),
    "greedy decoding to max_len without stopping early": ("test_greedy_decode", """
        def greedy_decode(model, src, src_lengths, max_len):
            with torch.no_grad():
                memory, src_mask = model.encode(src, src_lengths)
                out = [torch.full((src.shape[0],), BOS, dtype=torch.long)]
                for _ in range(max_len):
                    logits = model.decode(torch.stack(out, dim=1), memory, src_mask)
                    out.append(logits[:, -1].argmax(-1))
            return torch.stack(out[1:], dim=1)
    """),
    "GPT built with nn.Sequential-free loop and a float check": ("test_tiny_gpt", _swap(
        _GPT, "causal = torch.ones(L, L, dtype=torch.bool).tril()",
        "causal = torch.tril(torch.ones(L, L)) > 0.5")),
    "loss with log_softmax and gather": ("test_next_token_loss", """
        def next_token_loss(logits, ids):
            log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
            return -log_probs.gather(-1, ids[:, 1:].unsqueeze(-1)).mean()
    """),
    "sampling with torch.distributions-free cumulative sums": ("test_sample", _swap(
        _SAMPLE, "next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
        "probs = torch.softmax(logits.double(), dim=-1)\n"
        "            next_token = torch.multinomial(probs, num_samples=1, replacement=True, generator=generator)")),
    "top-k by scattering the k largest into zeros (exactly k on ties), float64": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            values, indices = (logits.double() / temperature).topk(k, dim=-1)
            kept = torch.zeros(logits.shape, dtype=torch.float64).scatter(-1, indices, torch.softmax(values, dim=-1))
            return kept.float()
    """),
    "top-k row by row with a sort": ("test_top_k", """
        def top_k_probabilities(logits, k, temperature=1.0):
            rows = []
            for row in logits:
                probabilities = torch.softmax(row / temperature, dim=0)
                threshold = probabilities.sort(descending=True).values[k - 1]
                kept = torch.where(probabilities >= threshold, probabilities, torch.zeros_like(probabilities))
                rows.append(kept / kept.sum())
            return torch.stack(rows)
    """),
    "top-p without a sort (the mass of the more likely tokens, ties kept together)": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            probabilities = torch.softmax(logits / temperature, dim=-1)
            more_likely = probabilities.unsqueeze(-2) > probabilities.unsqueeze(-1)    # [b, i, j]: token j beats i
            mass_before = (probabilities.unsqueeze(-2) * more_likely).sum(-1)
            kept = torch.where(mass_before < p, probabilities, torch.zeros_like(probabilities))
            return kept / kept.sum(dim=-1, keepdim=True)
    """),
    "top-p as filtered logits, sorted ascending (the way Hugging Face's warper does it)": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            scaled = logits / temperature
            sorted_logits, order = torch.sort(scaled, descending=False)
            cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cumulative <= (1 - p)
            remove_sorted[..., -1:] = False
            remove = remove_sorted.scatter(1, order, remove_sorted)
            return torch.softmax(scaled.masked_fill(remove, float("-inf")), dim=-1)
    """),
    "top-p row by row in Python, float64": ("test_top_p", """
        def top_p_probabilities(logits, p, temperature=1.0):
            out = torch.zeros(logits.shape, dtype=torch.float64)
            for b, row in enumerate(logits.double()):
                probabilities = torch.softmax(row / temperature, dim=0)
                total = 0.0
                for index in probabilities.argsort(descending=True).tolist():
                    out[b, index] = probabilities[index]
                    total += probabilities[index].item()
                    if total >= p:
                        break
                out[b] /= out[b].sum()
            return out
    """),
}

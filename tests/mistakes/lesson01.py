"""Lesson 1's tests pass the solution, accept other correct answers and catch the common mistakes."""


LESSON = "01_seq2seq_bottleneck"


_BEAM = """
    @torch.no_grad()
    def beam_search(model, src, src_lengths, max_len, beam_size=4, alpha=1.0):
        B, K, device = src.shape[0], beam_size, src.device
        _, context = model.encoder(src, src_lengths)
        context = context.repeat_interleave(K, dim=0)
        hidden = context
        token = torch.full((B * K,), BOS, dtype=torch.long, device=device)
        score = torch.full((B, K), float("-inf"), device=device)
        score[:, 0] = 0.0
        prefixes = torch.zeros(B, K, 0, dtype=torch.long, device=device)
        best_score = torch.full((B,), float("-inf"), device=device)
        best = torch.full((B, max_len), PAD, dtype=torch.long, device=device)
        best_length = torch.zeros(B, dtype=torch.long, device=device)
        rows = torch.arange(B, device=device)
        for step in range(1, max_len + 1):
            logits, hidden = model.decoder.step(token, hidden, context)
            log_probs = torch.log_softmax(logits.float(), dim=-1).view(B, K, -1)
            V = log_probs.shape[-1]
            top, index = (score.unsqueeze(-1) + log_probs).view(B, K * V).topk(K, dim=-1)
            parent, token = index // V, index % V
            prefixes = torch.cat([prefixes.gather(1, parent[..., None].expand(-1, -1, step - 1)), token[..., None]], -1)
            hidden = hidden.view(B, K, -1).gather(1, parent[..., None].expand(-1, -1, hidden.shape[-1])).view(B * K, -1)
            ended = (token == EOS) & torch.isfinite(top)
            normalised = (top / ((5 + step) / 6) ** alpha).masked_fill(~ended, float("-inf"))
            row_best, k_best = normalised.max(dim=-1)
            better = row_best > best_score
            best_score = torch.where(better, row_best, best_score)
            best_length = torch.where(better, torch.full_like(best_length, step), best_length)
            finished_now = torch.cat([prefixes[rows, k_best], best.new_full((B, max_len - step), PAD)], dim=-1)
            best = torch.where(better[:, None], finished_now, best)
            score = top.masked_fill(token == EOS, float("-inf"))
            token = token.view(-1)
            if not torch.isfinite(score).any():
                break
        unfinished = torch.isinf(best_score)
        if unfinished.any():
            live = prefixes[rows, score.argmax(dim=-1)]
            best[unfinished], best_length[unfinished] = live[unfinished], prefixes.shape[-1]
        return best[:, :int(best_length.max())]
"""

_PER_ROW = """
    @torch.no_grad()
    def beam_search(model, src, src_lengths, max_len, beam_size=4, alpha=1.0):
        results = []
        for r in range(src.shape[0]):
            _, context = model.encoder(src[r:r + 1], src_lengths[r:r + 1])
            beam = [([], 0.0, context)]                   # (tokens, log-probability, hidden state)
            finished = []
            for step in range(1, max_len + 1):
                candidates = []
                for tokens, score, hidden in beam:
                    previous = torch.tensor([tokens[-1] if tokens else BOS])
                    logits, new_hidden = model.decoder.step(previous, hidden, context)
                    log_probs = torch.log_softmax(logits[0], dim=-1)
                    for t in range(log_probs.shape[0]):
                        candidates.append((score + log_probs[t].item(), tokens + [t], new_hidden))
                candidates.sort(key=lambda c: c[0], reverse=True)
                beam = []
                for score, tokens, hidden in candidates[:beam_size]:
                    if tokens[-1] == EOS:
                        finished.append((score / ((5 + len(tokens)) / 6) ** alpha, tokens))
                    else:
                        beam.append((tokens, score, hidden))
                if not beam:
                    break
            best = max(finished)[1] if finished else max(beam, key=lambda h: h[1])[0]
            results.append(best)
        width = max(len(t) for t in results)
        return torch.tensor([t + [PAD] * (width - len(t)) for t in results], dtype=torch.long)
"""


def _swap(source, old, new):
    assert old in source, old
    return source.replace(old, new)


ALTERNATIVES = {
    "encoder with pack_padded_sequence": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), src_lengths.cpu(),
                                                           batch_first=True, enforce_sorted=False)
                out, h = self.rnn(packed)
                out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
                return out, h[0]
    """),
    "teacher forcing with a loop over decoder.step": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                hidden, logits = context, []
                for t in range(tgt_in.shape[1]):
                    step_logits, hidden = self.decoder.step(tgt_in[:, t], hidden, context)
                    logits.append(step_logits)
                return torch.stack(logits, 1)
    """),
    "loss with ignore_index": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD)
    """),
    "loss with boolean indexing": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            keep = targets != PAD
            return F.cross_entropy(logits[keep], targets[keep])
    """),
    "encoder with torch.gather": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                index = (src_lengths - 1).view(-1, 1, 1).expand(-1, 1, out.shape[-1])
                return out, out.gather(1, index)[:, 0]
    """),
    "greedy decoding row by row": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            rows = []
            for r in range(src.shape[0]):
                _, context = model.encoder(src[r:r + 1], src_lengths[r:r + 1])
                hidden, token, row = context, torch.tensor([BOS]), []
                for _ in range(max_len):
                    logits, hidden = model.decoder.step(token, hidden, context)
                    token = logits.argmax(-1)
                    row.append(int(token))
                    if row[-1] == EOS:
                        break
                rows.append(row)
            width = max(len(row) for row in rows)
            return torch.tensor([row + [PAD] * (width - len(row)) for row in rows], dtype=torch.long)
    """),
    "greedy decoding that asks the model for its device": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            device = next(model.parameters()).device
            _, context = model.encoder(src.to(device), src_lengths.to(device))
            hidden, token = context, torch.full((src.shape[0],), BOS, device=device)
            done = torch.zeros(src.shape[0], dtype=torch.bool, device=device)
            out = []
            while len(out) < max_len and not done.all():
                logits, hidden = model.decoder.step(token, hidden, context)
                token = logits.argmax(-1)
                out.append(token.masked_fill(done, PAD))
                done = done | (token == EOS)
            return torch.stack(out, 1)
    """),
    "beam search row by row in Python lists": ("test_beam_search", _PER_ROW),
    "beam search in float64 keeping finished hypotheses in a list per row": ("test_beam_search", """
        @torch.no_grad()
        def beam_search(model, src, src_lengths, max_len, beam_size=4, alpha=1.0):
            B, K = src.shape[0], beam_size
            _, context = model.encoder(src, src_lengths)
            context = context.repeat_interleave(K, 0)
            hidden = context
            tokens = torch.full((B * K, 1), BOS, dtype=torch.long)
            scores = torch.tensor([0.0] + [float("-inf")] * (K - 1), dtype=torch.float64).repeat(B, 1)
            finished = [[] for _ in range(B)]
            for step in range(max_len):
                logits, hidden = model.decoder.step(tokens[:, -1], hidden, context)
                total = scores[..., None] + torch.log_softmax(logits.double(), -1).view(B, K, -1)
                flat = total.view(B, -1)
                top = flat.topk(K, dim=-1)
                V = total.shape[-1]
                chosen = (torch.arange(B)[:, None] * K + top.indices // V).view(-1)
                tokens = torch.cat([tokens[chosen], (top.indices % V).view(-1, 1)], 1)
                hidden = hidden[chosen]
                scores = top.values.clone()
                for b in range(B):
                    for k in range(K):
                        if tokens[b * K + k, -1] == EOS and scores[b, k] > float("-inf"):
                            n = tokens.shape[1] - 1
                            finished[b].append((scores[b, k].item() / ((5 + n) / 6) ** alpha, tokens[b * K + k, 1:].tolist()))
                            scores[b, k] = float("-inf")
                if torch.isinf(scores).all():
                    break
            out = []
            for b in range(B):
                if finished[b]:
                    out.append(max(finished[b], key=lambda f: f[0])[1])
                else:
                    out.append(tokens[b * K + int(scores[b].argmax()), 1:].tolist())
            width = max(map(len, out))
            return torch.tensor([o + [PAD] * (width - len(o)) for o in out])
    """),
    "beam search that returns max_len columns": ("test_beam_search", _swap(
        _BEAM, "return best[:, :int(best_length.max())]", "return best")),
}


MISTAKES = {
    # charged once (issue 19 s8): each of these fails its own test cell only
    "decoder step that keeps the GRU's layer axis in the new state": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(out[:, 0]), h
    """, "keeps the GRU's layer axis"),
    "encoder run under torch.no_grad (nothing trains)": ("test_encoder", """
        class Encoder(Encoder):
            @torch.no_grad()
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 1]
    """, "torch.no_grad()"),
    "encoder with the GRU's state and the embedding swapped in their names": ("test_encoder", """
        class Encoder(Encoder):
            def __init__(self, vocab_size, emb_dim, hidden_dim):
                nn.Module.__init__(self)
                self.emb = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
                self.gru = nn.GRU(emb_dim, hidden_dim, batch_first=True)
            def forward(self, src, src_lengths):
                out, _ = self.gru(self.emb(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 1]
    """, "self.embedding (nn.Embedding)"),
    "teacher forcing that detaches the context (the encoder never learns)": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                context = context.detach()
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """, ("no gradient reached", "detached")),
    "loss that zeroes the padded logits in place": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            logits.data[targets == PAD] = 0.0
            keep = targets != PAD
            return F.cross_entropy(logits[keep], targets[keep])
    """, "changed its input in place"),
    "greedy decoding that changes src in place": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            out = _solution_greedy(model, src, src_lengths, max_len)
            src[:, :1] = 3
            return out
    """, "changed its input in place"),
    "final state taken at the last padded position": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, h = self.rnn(self.embedding(src))
                return out, h[0]
    """, "last position of the padded batch"),
    "final state one position too early": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 2]
    """, "one position too early"),
    "decoder step that ignores the context": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), torch.zeros_like(context)], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(out[:, 0]), h[0]
    """, "new state does not change when the context changes"),
    "decoder step that ignores the previous state": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x)
                return self.out(out[:, 0]), h[0]
    """, "does not change when the previous state changes"),
    "teacher forcing that starts from a zero state": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x)
                return self.decoder.out(out)
    """, "starts from a zero state"),
    "teacher forcing that drops the context from the inputs": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               torch.zeros(*tgt_in.shape, context.shape[-1])], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """, "context is missing from the decoder's inputs"),
    "loss that averages over padding too": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            return (per_token * (targets.flatten() != PAD)).mean()
    """, "divided by every position, padding included"),
    "loss that averages each row first": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            mask = (targets != PAD).float()
            return ((per_token * mask).sum(1) / mask.sum(1)).mean()
    """, "averages each row first"),
    "greedy decoding that never stops early": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            out = _solution_greedy(model, src, src_lengths, max_len)
            return torch.cat([out, torch.full((out.shape[0], max_len - out.shape[1]), PAD)], 1)
    """, "keeps stepping after every row has produced <eos>"),
    "greedy decoding that keeps writing after <eos>": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            _, context = model.encoder(src, src_lengths)
            hidden, token, out = context, torch.full((src.shape[0],), BOS), []
            for _ in range(max_len):
                logits, hidden = model.decoder.step(token, hidden, context)
                token = logits.argmax(-1)
                out.append(token)
            return torch.stack(out, 1)
    """, "keeps writing after its <eos>"),
    "teacher forcing with the context taken at the padded end": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                outputs, _ = self.encoder(src, src_lengths)
                context = outputs[:, -1]
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """, "last padded position"),
    "greedy decoding that feeds <bos> at every step": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            _, context = model.encoder(src, src_lengths)
            hidden, bos = context, torch.full((src.shape[0],), BOS)
            done, out = torch.zeros(src.shape[0], dtype=torch.bool), []
            for _ in range(max_len):
                logits, hidden = model.decoder.step(bos, hidden, context)
                token = logits.argmax(-1)
                out.append(token.masked_fill(done, PAD))
                done |= token == EOS
                if done.all():
                    break
            return torch.stack(out, 1)
    """, "feeds <bos> at every step"),
    "greedy decoding that restarts from the context at every step": ("test_greedy_decode", """
        @torch.no_grad()
        def greedy_decode(model, src, src_lengths, max_len):
            _, context = model.encoder(src, src_lengths)
            token = torch.full((src.shape[0],), BOS)
            done, out = torch.zeros(src.shape[0], dtype=torch.bool), []
            for _ in range(max_len):
                logits, _ = model.decoder.step(token, context, context)
                token = logits.argmax(-1)
                out.append(token.masked_fill(done, PAD))
                done |= token == EOS
                if done.all():
                    break
            return torch.stack(out, 1)
    """, "restarts from the context at every step"),
    "greedy decoding that returns float ids": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            return _solution_greedy(model, src, src_lengths, max_len).float()
    """, "token ids are int64"),
    "encoder whose outputs are a tensor subclass that always compares equal": ("test_encoder", """
        class _Liar(torch.Tensor):
            def __eq__(self, other): return True
            def __sub__(self, other): return torch.zeros(self.shape)
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, h = self.rnn(self.embedding(src))
                return out.as_subclass(_Liar), h[0].as_subclass(_Liar)
    """, "plain torch.Tensor"),
    "loss returned as a Python float": ("test_sequence_loss", """
        _solution_loss = sequence_loss
        def sequence_loss(logits, targets):
            return float(_solution_loss(logits, targets))
    """, "not a tensor"),
    "concept: loss averaged over every padded position": ("test_concepts", """
        loss_positions = 3 * 8
    """, "every position of the padded batch is counted"),
    "concept: a context that grows with the source": ("test_concepts", """
        context_numbers = 30 * 128
    """, "the context grows with the source"),
    "concept: a letter that claims to equal every answer": ("test_concepts", """
        class _Liar(str):
            def __eq__(self, other): return True
            __hash__ = str.__hash__
        reverse_answer = _Liar("a")
    """, "plain str"),
    "beam comparing unnormalised scores": ("test_beam_search", _swap(
        _BEAM, "normalised = (top / ((5 + step) / 6) ** alpha)", "normalised = top"), "plain log-probability"),
    "beam returning the first hypothesis to finish": ("test_beam_search", _swap(
        _BEAM, "better = row_best > best_score", "better = (row_best > float('-inf')) & torch.isinf(best_score)"),
        "first hypothesis to finish wins"),
    "length penalty counting the tokens without <eos>": ("test_beam_search", _swap(
        _BEAM, "((5 + step) / 6) ** alpha", "((4 + step) / 6) ** alpha"), "without the <eos>"),
    "length penalty counting <bos> too": ("test_beam_search", _swap(
        _BEAM, "((5 + step) / 6) ** alpha", "((6 + step) / 6) ** alpha"), "counts <bos> too"),
    "length penalty: divided by the length": ("test_beam_search", _swap(
        _BEAM, "((5 + step) / 6) ** alpha", "step"), "divided by the length n"),
    "length penalty: divided by the length to the power alpha": ("test_beam_search", _swap(
        _BEAM, "((5 + step) / 6) ** alpha", "step ** alpha"), "divided by n ** alpha"),
    "length penalty without alpha": ("test_beam_search", _swap(
        _BEAM, "((5 + step) / 6) ** alpha", "((5 + step) / 6)"), "leaves out alpha"),
    "length penalty multiplied": ("test_beam_search", _swap(
        _BEAM, "(top / ((5 + step) / 6) ** alpha)", "(top * ((5 + step) / 6) ** alpha)"),
        "multiplied by the length penalty"),
    "finished hypotheses extended past <eos>": ("test_beam_search", _swap(
        _BEAM, 'score = top.masked_fill(token == EOS, float("-inf"))', "score = top"), "goes on after its <eos>"),
    "finished hypotheses kept in the beam and extended (recorded once, at their first <eos>)": ("test_beam_search", _swap(_swap(
        _BEAM, 'score = top.masked_fill(token == EOS, float("-inf"))', "score = top"),
        "ended = (token == EOS) & torch.isfinite(top)",
        "ended = (token == EOS) & torch.isfinite(top) & ((prefixes == EOS).sum(-1) == 1)"), "stay in the beam"),
    "every hypothesis extended, the best picked at the end and cut at its first <eos>": ("test_beam_search", """
        @torch.no_grad()
        def beam_search(model, src, src_lengths, max_len, beam_size=4, alpha=1.0):
            B, K = src.shape[0], beam_size
            _, context = model.encoder(src, src_lengths)
            context = context.repeat_interleave(K, dim=0)
            hidden, token = context, torch.full((B * K,), BOS, dtype=torch.long)
            score = torch.full((B, K), float("-inf"))
            score[:, 0] = 0.0
            prefixes = torch.zeros(B, K, 0, dtype=torch.long)
            for step in range(1, max_len + 1):
                logits, hidden = model.decoder.step(token, hidden, context)
                log_probs = torch.log_softmax(logits, dim=-1).view(B, K, -1)
                V = log_probs.shape[-1]
                score, index = (score.unsqueeze(-1) + log_probs).view(B, K * V).topk(K, dim=-1)
                parent, token = index // V, index % V
                prefixes = torch.cat([prefixes.gather(1, parent[..., None].expand(-1, -1, step - 1)), token[..., None]], -1)
                hidden = hidden.view(B, K, -1).gather(1, parent[..., None].expand(-1, -1, hidden.shape[-1])).view(B * K, -1)
                token = token.view(-1)
            out = prefixes[torch.arange(B), (score / ((5 + max_len) / 6) ** alpha).argmax(-1)]
            after = (out == EOS).long().cumsum(-1) - (out == EOS).long() > 0
            return out.masked_fill(after, PAD)
    """, "extended to max_len"),
    "every beam starting from <bos> (copies of one hypothesis fill the beam)": ("test_beam_search", _swap(
        _BEAM, "score = torch.full((B, K), float(\"-inf\"), device=device)\n        score[:, 0] = 0.0",
        "score = torch.zeros(B, K, device=device)"), "copies of one hypothesis"),
    "top-k over the whole batch instead of each row": ("test_beam_search", """
        @torch.no_grad()
        def beam_search(model, src, src_lengths, max_len, beam_size=4, alpha=1.0):
            B = src.shape[0]
            K = B * beam_size                     # one beam shared by every row
            _, context = model.encoder(src, src_lengths)
            context = context.repeat_interleave(beam_size, dim=0)
            hidden, token = context, torch.full((K,), BOS, dtype=torch.long)
            owner = torch.arange(B).repeat_interleave(beam_size)
            score = torch.full((K,), float("-inf"))
            score[::beam_size] = 0.0
            prefixes = torch.zeros(K, 0, dtype=torch.long)
            best_score, best = [float("-inf")] * B, [None] * B
            for step in range(1, max_len + 1):
                logits, hidden = model.decoder.step(token, hidden, context)
                log_probs = torch.log_softmax(logits, dim=-1)
                V = log_probs.shape[-1]
                top, index = (score[:, None] + log_probs).view(-1).topk(K)
                parent, token = index // V, index % V
                prefixes = torch.cat([prefixes[parent], token[:, None]], -1)
                hidden, context, owner = hidden[parent], context[parent], owner[parent]
                for k in range(K):
                    if token[k] == EOS and torch.isfinite(top[k]):
                        s = top[k].item() / ((5 + step) / 6) ** alpha
                        if s > best_score[owner[k]]:
                            best_score[owner[k]], best[owner[k]] = s, prefixes[k].tolist()
                score = top.masked_fill(token == EOS, float("-inf"))
                if not torch.isfinite(score).any():
                    break
            best = [b if b is not None else prefixes[0].tolist() for b in best]
            width = max(len(b) for b in best)
            return torch.tensor([b + [PAD] * (width - len(b)) for b in best])
    """, "not searched on their own"),
    "nothing returned for a row in which no hypothesis finished": ("test_beam_search", _swap(
        _BEAM, "if unfinished.any():", "if False:"), "nothing is returned"),
    "final state taken after the first token": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                return out, out[:, 0]
    """, "after the first token"),
    "encoder that sorts the batch for pack_padded_sequence and leaves the final states sorted": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                order = src_lengths.argsort(descending=True)
                packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src)[order], src_lengths[order].cpu(),
                                                           batch_first=True)
                out, h = self.rnn(packed)
                out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
                return out[order.argsort()], h[0]
    """, "decreasing length"),
    "decoder step with the context before the embedding": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([context, self.embedding(token)], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(out[:, 0]), h[0]
    """, "[context, embedding(token)]"),
    "decoder step with hidden and context swapped": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), hidden], -1).unsqueeze(1)
                out, h = self.rnn(x, context.unsqueeze(0))
                return self.out(out[:, 0]), h[0]
    """, "hidden and context are swapped"),
    "decoder step whose logits come from the previous state": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(hidden), h[0]
    """, "computed from the previous state"),
    "decoder step that returns probabilities": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return torch.softmax(self.out(out[:, 0]), -1), h[0]
    """, "returns probabilities"),
    "teacher forcing that shifts tgt_in once more": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                tgt_in = torch.cat([torch.full_like(tgt_in[:, :1], BOS), tgt_in[:, :-1]], 1)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """, "shifted once more"),
    "teacher forcing that returns probabilities": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return torch.softmax(self.decoder.out(out), -1)
    """, "forward returns probabilities"),
    "loss summed instead of averaged": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD, reduction="sum")
    """, "summed over the non-pad positions, not averaged"),
    "loss that counts <pad> as a target": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    """, "<pad> positions count as targets"),
    "loss as nll_loss of the raw logits": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            return F.nll_loss(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD)
    """, "no log_softmax"),
    "concept: loss positions without the <eos>": ("test_concepts", """
        loss_positions = 4 + 7 + 2
    """, "<eos> of each target is left out"),
    "concept: reversing said to shorten the average distance": ("test_concepts", """
        reverse_answer = "a"
    """, "does not change the average distance"),
}


# Seq2Seq.forward is checked with your own Encoder and Decoder loaded with known weights; it is accepted
# if it agrees with stepping correct parts or yours. An encoder whose outputs are not plain tensors gives
# the grader no context to step from, so the Seq2Seq test has nothing to compare with.
ALSO_FAILS = {
    "encoder whose outputs are a tensor subclass that always compares equal": (
        ("test_seq2seq_forward",), "its context is not a plain tensor: stepping from it cannot be computed"),
}

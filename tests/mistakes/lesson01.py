"""Lesson 1's tests pass the solution, accept other correct answers and catch the common mistakes."""


LESSON = "01_seq2seq_bottleneck"


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
}


MISTAKES = {
    # charged once (issue 19 s8): each of these fails its own test cell only
    "decoder step that keeps the GRU's layer axis in the new state": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(out[:, 0]), h
    """),
    "encoder run under torch.no_grad (nothing trains)": ("test_encoder", """
        class Encoder(Encoder):
            @torch.no_grad()
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 1]
    """),
    "encoder with the GRU's state and the embedding swapped in their names": ("test_encoder", """
        class Encoder(Encoder):
            def __init__(self, vocab_size, emb_dim, hidden_dim):
                nn.Module.__init__(self)
                self.emb = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
                self.gru = nn.GRU(emb_dim, hidden_dim, batch_first=True)
            def forward(self, src, src_lengths):
                out, _ = self.gru(self.emb(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 1]
    """),
    "teacher forcing that detaches the context (the encoder never learns)": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                context = context.detach()
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """),
    "loss that zeroes the padded logits in place": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            logits.data[targets == PAD] = 0.0
            keep = targets != PAD
            return F.cross_entropy(logits[keep], targets[keep])
    """),
    "greedy decoding that changes src in place": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            out = _solution_greedy(model, src, src_lengths, max_len)
            src[:, :1] = 3
            return out
    """),
    "final state taken at the last padded position": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, h = self.rnn(self.embedding(src))
                return out, h[0]
    """),
    "final state one position too early": ("test_encoder", """
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, _ = self.rnn(self.embedding(src))
                return out, out[torch.arange(src.shape[0]), src_lengths - 2]
    """),
    "decoder step that ignores the context": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), torch.zeros_like(context)], -1).unsqueeze(1)
                out, h = self.rnn(x, hidden.unsqueeze(0))
                return self.out(out[:, 0]), h[0]
    """),
    "decoder step that ignores the previous state": ("test_decoder_step", """
        class Decoder(Decoder):
            def step(self, token, hidden, context):
                x = torch.cat([self.embedding(token), context], -1).unsqueeze(1)
                out, h = self.rnn(x)
                return self.out(out[:, 0]), h[0]
    """),
    "teacher forcing that starts from a zero state": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x)
                return self.decoder.out(out)
    """),
    "teacher forcing that drops the context from the inputs": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                _, context = self.encoder(src, src_lengths)
                x = torch.cat([self.decoder.embedding(tgt_in),
                               torch.zeros(*tgt_in.shape, context.shape[-1])], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """),
    "loss that averages over padding too": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            return (per_token * (targets.flatten() != PAD)).mean()
    """),
    "loss that averages each row first": ("test_sequence_loss", """
        def sequence_loss(logits, targets):
            per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            mask = (targets != PAD).float()
            return ((per_token * mask).sum(1) / mask.sum(1)).mean()
    """),
    "greedy decoding that never stops early": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            out = _solution_greedy(model, src, src_lengths, max_len)
            return torch.cat([out, torch.full((out.shape[0], max_len - out.shape[1]), PAD)], 1)
    """),
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
    """),
    "teacher forcing with the context taken at the padded end": ("test_seq2seq_forward", """
        class Seq2Seq(Seq2Seq):
            def forward(self, src, src_lengths, tgt_in):
                outputs, _ = self.encoder(src, src_lengths)
                context = outputs[:, -1]
                x = torch.cat([self.decoder.embedding(tgt_in),
                               context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)], -1)
                out, _ = self.decoder.rnn(x, context.unsqueeze(0).contiguous())
                return self.decoder.out(out)
    """),
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
    """),
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
    """),
    "greedy decoding that returns float ids": ("test_greedy_decode", """
        _solution_greedy = greedy_decode
        def greedy_decode(model, src, src_lengths, max_len):
            return _solution_greedy(model, src, src_lengths, max_len).float()
    """),
    "encoder whose outputs are a tensor subclass that always compares equal": ("test_encoder", """
        class _Liar(torch.Tensor):
            def __eq__(self, other): return True
            def __sub__(self, other): return torch.zeros(self.shape)
        class Encoder(Encoder):
            def forward(self, src, src_lengths):
                out, h = self.rnn(self.embedding(src))
                return out.as_subclass(_Liar), h[0].as_subclass(_Liar)
    """),
    "loss returned as a Python float": ("test_sequence_loss", """
        _solution_loss = sequence_loss
        def sequence_loss(logits, targets):
            return float(_solution_loss(logits, targets))
    """),
    "concept: loss averaged over every padded position": ("test_concepts", """
        loss_positions = 3 * 8
    """),
    "concept: a context that grows with the source": ("test_concepts", """
        context_numbers = 30 * 128
    """),
    "concept: a letter that claims to equal every answer": ("test_concepts", """
        class _Liar(str):
            def __eq__(self, other): return True
            __hash__ = str.__hash__
        reverse_answer = _Liar("a")
    """),
}

"""Lesson 2: the graded tests pass the solution and catch the common mistakes.

Each mistake below is a plausible wrong answer to one exercise. The test runs the
solution notebook's own test cell (visible and hidden tests) against it and expects
a failure; the correct solution must pass every test cell.
"""


LESSON = "02_bahdanau_attention"


MISTAKES = {
    "attention_weights that masks the caller's scores in place": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            scores.masked_fill_(~mask, float("-inf"))
            return torch.softmax(scores, dim=-1).nan_to_num(0.0)
    """, "changed its input in place"),
    # charged once (tests/lessons/test_mistakes.py checks that each mistake fails its own test cell only)
    "attention_weights with the softmax over the queries": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            return torch.softmax(scores, dim=1)
    """, ("over the queries", "mask is not applied")),
    "attend with uniform weights over every position": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            w = torch.full((query.shape[0], query.shape[1], encoder_states.shape[1]), 1.0 / encoder_states.shape[1])
            return w @ encoder_states, w
    """, "weights are uniform"),
    "additive score that ignores the keys": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.W(query).sum(-1, keepdim=True).expand(-1, -1, keys.shape[1])
    """, "do not change when a key changes"),
    "additive score without tanh": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(self.W(query).unsqueeze(2) + self.U(keys).unsqueeze(1)).squeeze(-1)
    """, "the tanh is missing"),
    "additive score that ignores the keys (the old PyTorch tutorial)": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(torch.tanh(self.W(query))).expand(-1, -1, keys.shape[1])
    """, "old PyTorch tutorial"),
    "additive score with query and key axes swapped": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(torch.tanh(self.W(query).unsqueeze(1) + self.U(keys).unsqueeze(2))).squeeze(-1)
    """, "key axis before the query axis"),
    "softmax over the query axis": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.nan_to_num(torch.softmax(scores, dim=1))
    """, "the softmax runs over the queries (dim=1): take"),
    "mask applied to the weights after the softmax": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            weights = torch.softmax(scores, dim=-1)
            return weights if mask is None else weights.masked_fill(~mask, 0.0)
    """, "after the softmax"),
    "inverted mask": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.nan_to_num(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1))
    """, "mask is inverted"),
    "-1e9 instead of -inf: a fully masked row gets uniform weights": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
    """, "uniform weights"),
    "-inf without handling fully masked rows (NaN)": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    """, "gets NaN weights"),
    "attend whose weights ignore the encoder states": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(score(query, torch.ones_like(encoder_states)), mask)
            return weights @ encoder_states, weights
    """, "do not change when the encoder states change"),
    "attend that averages the encoder states instead of weighting them": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(score(query, encoder_states), mask)
            context = encoder_states.mean(1, keepdim=True).expand(-1, query.shape[1], -1)
            return context, weights
    """, "plain average of the encoder states"),
    "attend that ignores the score function it is given": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(query @ encoder_states.transpose(1, 2), mask)
            return weights @ encoder_states, weights
    """, "is not used"),
    "Bahdanau step that queries with the new state s_i (Luong's order)": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                embedded = self.embedding(token)
                context0, _ = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                hidden = self.rnn(torch.cat([embedded, context0[:, 0]], -1), hidden)
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """, "weights come from the NEW state"),
    "Bahdanau step that does not feed the context into the GRU": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, torch.zeros_like(context[:, 0])], -1), hidden)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """, "does not receive the context"),
    "Bahdanau step that returns the previous state": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                embedded = self.embedding(token)
                new_hidden = self.rnn(torch.cat([embedded, context[:, 0]], -1), hidden)
                logits = self.out(torch.cat([new_hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """, "returns the previous state"),
    "Bahdanau step that ignores the padding mask": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, None, self.score)
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, context[:, 0]], -1), hidden)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """, "padding mask is not applied"),
    "dot score scaled by sqrt(D)": ("test_dot_score", """
        def dot_score(query, keys):
            return query @ keys.transpose(1, 2) / query.shape[-1] ** 0.5
    """, "divided by sqrt(D)"),
    "dot score with query and keys swapped": ("test_dot_score", """
        def dot_score(query, keys):
            return keys @ query.transpose(1, 2)
    """, "keys against queries"),
    "general score with W_a on the query side": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ self.W.weight.t() @ keys.transpose(1, 2)
    """, "W_a is applied to the query"),
    "general score without W_a (plain dot)": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ keys[..., :query.shape[-1]].transpose(1, 2)
    """, "leave out W_a"),
    "attend that calls the score with its arguments swapped": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(score(encoder_states, query).transpose(1, 2), mask)
            return weights @ encoder_states, weights
    """, "arguments swapped"),
    "attention weights in float64": ("test_attention_weights", """
        _solution_weights = attention_weights
        def attention_weights(scores, mask=None):
            return _solution_weights(scores, mask).double()
    """, "float64"),
    "attention weights that mask only the last key of padded rows": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            m = mask.expand_as(scores).clone()
            m[..., :-1] = True
            m = m | mask.expand_as(scores)
            w = torch.softmax(scores.masked_fill(~m, float("-inf")), dim=-1)
            return torch.nan_to_num(w)
    """, "Masked keys must get exactly 0 weight"),
    "additive score with W and U swapped": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                if query.shape[-1] != keys.shape[-1]:
                    hidden = torch.tanh(self.W(query).unsqueeze(2) + self.U(keys).unsqueeze(1))
                else:
                    hidden = torch.tanh(self.U(query).unsqueeze(2) + self.W(keys).unsqueeze(1))
                return self.v(hidden).squeeze(-1)
    """, "self.W and self.U are swapped"),
    "dot score as keys . queries transposed (only right when Lq == Lk)": ("test_dot_score", """
        def dot_score(query, keys):
            if query.shape[1] == keys.shape[1]:
                return keys @ query.transpose(1, 2)
            return query @ keys.transpose(1, 2)
    """, "transposed, key i against query j"),
    "concept: scores counted as Lx + Ly": ("test_concepts", """
        n_scores = 12 + 9
    """, "lengths are added"),
    "concept: padding gets weight too": ("test_concepts", """
        nonzero_weights = 7
    """, "padded positions are counted: masked"),
    "concept: Bahdanau's query for parallel training": ("test_concepts", """
        parallel_answer = "a"
    """, "depends on the context of the step before"),
    "additive score without v (the tanh summed)": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return torch.tanh(self.W(query).unsqueeze(2) + self.U(keys).unsqueeze(1)).sum(-1)
    """, "v is missing"),
    "additive score that returns softmax weights": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                e = self.v(torch.tanh(self.W(query).unsqueeze(2) + self.U(keys).unsqueeze(1))).squeeze(-1)
                return torch.softmax(e, dim=-1)
    """, "come out as weights"),
    "Bahdanau step whose output layer reads [c_i, s_i, E y]": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                context, weights = context[:, 0], weights[:, 0]
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, context], -1), hidden)
                logits = self.out(torch.cat([context, hidden, embedded], -1))
                return logits, hidden, weights
    """, "in another order"),
    "Bahdanau step whose logits come from the previous state": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                context, weights = context[:, 0], weights[:, 0]
                embedded = self.embedding(token)
                new_hidden = self.rnn(torch.cat([embedded, context], -1), hidden)
                logits = self.out(torch.cat([hidden, context, embedded], -1))
                return logits, new_hidden, weights
    """, "logits come from the previous state"),
    "dot score as a cosine similarity": ("test_dot_score", """
        def dot_score(query, keys):
            return F.normalize(query, dim=-1) @ F.normalize(keys, dim=-1).transpose(1, 2)
    """, "cosine similarities"),
    "dot score that returns softmax weights": ("test_dot_score", """
        def dot_score(query, keys):
            return torch.softmax(query @ keys.transpose(1, 2), dim=-1)
    """, "come out as weights"),
    "general score scaled by sqrt(query_dim)": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ self.W(keys).transpose(1, 2) / query.shape[-1] ** 0.5
    """, "divided by sqrt(query_dim)"),
    "general score that returns softmax weights": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return torch.softmax(query @ self.W(keys).transpose(1, 2), dim=-1)
    """, "come out as weights"),
    "general score with a tanh on the keys": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ torch.tanh(self.W(keys)).transpose(1, 2)
    """, "no tanh"),
    "concept: one score per decoder step": ("test_concepts", """
        n_scores = 9
    """, "one score per decoder step"),
    "concept: the padded positions counted instead of the real ones": ("test_concepts", """
        nonzero_weights = 7 - 4
    """, "instead of the real ones"),
}

ALTERNATIVES = {
    "attention weights with torch.where and nan_to_num": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return scores.softmax(-1)
            filled = torch.where(mask, scores, torch.tensor(float("-inf")))
            return torch.nan_to_num(filled.softmax(-1), nan=0.0)
    """),
    "attention weights by hand with exp and a max shift": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                mask = torch.ones_like(scores, dtype=torch.bool)
            mask = mask.expand_as(scores)
            shifted = scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True).nan_to_num(0.0)
            e = torch.exp(shifted) * mask
            total = e.sum(-1, keepdim=True)
            return torch.where(total > 0, e / total.clamp_min(1e-30), torch.zeros_like(e))
    """),
    "attend with einsum, never calling attention_weights": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            s = score(query, encoder_states)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.nan_to_num(torch.softmax(s, -1))
            return torch.einsum("bij,bjd->bid", w, encoder_states), w
    """),
    "Bahdanau step that computes the attention inline": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                e = self.score(hidden.unsqueeze(1), encoder_states)[:, 0]
                w = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)
                context = torch.bmm(w.unsqueeze(1), encoder_states)[:, 0]
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, context], -1), hidden)
                return self.out(torch.cat([hidden, context, embedded], -1)), hidden, w
    """),
    "dot score with einsum": ("test_dot_score", """
        def dot_score(query, keys):
            return torch.einsum("bqd,bkd->bqk", query, keys)
    """),
    "general score with the weight matrix by hand": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return torch.einsum("bqd,de,bke->bqk", query, self.W.weight, keys)
    """),
}

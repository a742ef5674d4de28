"""Lesson 2: the graded tests pass the solution and catch the common mistakes.

Each mistake below is a plausible wrong answer to one exercise. The test runs the
solution notebook's own test cell (visible and hidden tests) against it and expects
a failure; the correct solution must pass every test cell.
"""


LESSON = "02_bahdanau_attention"


MISTAKES = {
    "additive score without tanh": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(self.W(query).unsqueeze(2) + self.U(keys).unsqueeze(1)).squeeze(-1)
    """),
    "additive score that ignores the keys (the old PyTorch tutorial)": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(torch.tanh(self.W(query))).expand(-1, -1, keys.shape[1])
    """),
    "additive score with query and key axes swapped": ("test_additive_score", """
        class AdditiveScore(AdditiveScore):
            def forward(self, query, keys):
                return self.v(torch.tanh(self.W(query).unsqueeze(1) + self.U(keys).unsqueeze(2))).squeeze(-1)
    """),
    "softmax over the query axis": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.nan_to_num(torch.softmax(scores, dim=1))
    """),
    "mask applied to the weights after the softmax": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            weights = torch.softmax(scores, dim=-1)
            return weights if mask is None else weights.masked_fill(~mask, 0.0)
    """),
    "inverted mask": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.nan_to_num(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1))
    """),
    "-1e9 instead of -inf: a fully masked row gets uniform weights": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
    """),
    "-inf without handling fully masked rows (NaN)": ("test_attention_weights", """
        def attention_weights(scores, mask=None):
            if mask is None:
                return torch.softmax(scores, dim=-1)
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    """),
    "attend whose weights ignore the encoder states": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(score(query, torch.ones_like(encoder_states)), mask)
            return weights @ encoder_states, weights
    """),
    "attend that averages the encoder states instead of weighting them": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(score(query, encoder_states), mask)
            context = encoder_states.mean(1, keepdim=True).expand(-1, query.shape[1], -1)
            return context, weights
    """),
    "attend that ignores the score function it is given": ("test_attend", """
        def attend(query, encoder_states, mask, score):
            weights = attention_weights(query @ encoder_states.transpose(1, 2), mask)
            return weights @ encoder_states, weights
    """),
    "Bahdanau step that queries with the new state s_i (Luong's order)": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                embedded = self.embedding(token)
                context0, _ = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                hidden = self.rnn(torch.cat([embedded, context0[:, 0]], -1), hidden)
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """),
    "Bahdanau step that does not feed the context into the GRU": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, torch.zeros_like(context[:, 0])], -1), hidden)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """),
    "Bahdanau step that returns the previous state": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, mask.unsqueeze(1), self.score)
                embedded = self.embedding(token)
                new_hidden = self.rnn(torch.cat([embedded, context[:, 0]], -1), hidden)
                logits = self.out(torch.cat([new_hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """),
    "Bahdanau step that ignores the padding mask": ("test_bahdanau_decoder", """
        class BahdanauDecoder(BahdanauDecoder):
            def step(self, token, hidden, encoder_states, mask):
                context, weights = attend(hidden.unsqueeze(1), encoder_states, None, self.score)
                embedded = self.embedding(token)
                hidden = self.rnn(torch.cat([embedded, context[:, 0]], -1), hidden)
                logits = self.out(torch.cat([hidden, context[:, 0], embedded], -1))
                return logits, hidden, weights[:, 0]
    """),
    "dot score scaled by sqrt(D)": ("test_dot_score", """
        def dot_score(query, keys):
            return query @ keys.transpose(1, 2) / query.shape[-1] ** 0.5
    """),
    "dot score with query and keys swapped": ("test_dot_score", """
        def dot_score(query, keys):
            return keys @ query.transpose(1, 2)
    """),
    "general score with W_a on the query side": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ self.W.weight.t() @ keys.transpose(1, 2)
    """),
    "general score without W_a (plain dot)": ("test_general_score", """
        class GeneralScore(GeneralScore):
            def forward(self, query, keys):
                return query @ keys[..., :query.shape[-1]].transpose(1, 2)
    """),
}

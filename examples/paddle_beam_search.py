"""A ported Paddle model: a GRU encoder-decoder, trained with teacher forcing, decoding with
Paddle's ``beam_search`` / ``beam_search_decode`` over LoD beams (the loop of Paddle's
``machine_translation`` book chapter, fluid 1.x)::

    # encoder
    src_emb = fluid.embedding(src, size=[V, E])
    enc = fluid.layers.dynamic_gru(fluid.layers.fc(src_emb, size=3 * H), size=H)
    context = fluid.layers.sequence_last_step(enc)
    # decoder (inference): one step per loop iteration over all live beams
    ids_array = fluid.layers.create_array("int64"); scores_array = fluid.layers.create_array("float32")
    while step < max_len:
        pre_ids = fluid.layers.array_read(ids_array, i=counter)
        pre_state = fluid.layers.array_read(state_array, i=counter)
        pre_score = fluid.layers.array_read(scores_array, i=counter)
        state = gru_step(fluid.embedding(pre_ids), pre_state)
        probs = fluid.layers.fc(state, size=V, act="softmax")
        topk_scores, topk_indices = fluid.layers.topk(probs, k=beam_size)
        accu = fluid.layers.elementwise_add(fluid.layers.log(topk_scores), pre_score, axis=0)
        selected_ids, selected_scores, parent = fluid.layers.beam_search(
            pre_ids, pre_score, topk_indices, accu, beam_size, end_id=EOS, return_parent_idx=True)
        ... write selected_ids / selected_scores / gathered states to the arrays
    ids, scores = fluid.layers.beam_search_decode(ids_array, scores_array, beam_size, end_id=EOS)

The task: output the source tokens reversed, then EOS. The checks: every decoded sentence's
score equals the model's log-probability of that sentence (teacher-forced), the best
sentence per source scores at least as well as greedy decoding (beam size 1), and the
decoder reverses most test sources.

Run: python examples/paddle_beam_search.py
"""

import numpy as np
import torch

import lodtensor as lt
from lodtensor import nn
from lodtensor.fluid import LoDTensorArray
from lodtensor.fluid import layers as L

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(2)
BOS, EOS, V, E, H = 0, 1, 7, 16, 48
MAX_LEN = 6


def batch(n):
    lengths = rng.integers(1, 4, n)
    src = [rng.integers(2, V, k) for k in lengths]
    trg = [np.append(s[::-1], EOS) for s in src]
    as_lod = lambda seqs: lt.LoDTensor(np.concatenate(seqs).reshape(-1, 1),  # noqa: E731
                                       recursive_sequence_lengths=[[len(s) for s in seqs]])
    trg_in = [np.concatenate([[BOS], t[:-1]]) for t in trg]
    return as_lod(src), as_lod(trg_in), as_lod(trg)


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb, self.trg_emb = nn.Embedding(V, E), nn.Embedding(V, E)
        self.enc_proj, self.dec_proj = nn.FC(E, 3 * H), nn.FC(E, 3 * H)
        self.encoder, self.decoder = nn.DynamicGRU(H), nn.DynamicGRU(H)
        self.out = nn.FC(H, V)

    def encode(self, src):
        enc = self.encoder(self.enc_proj(self.src_emb(src)))
        return L.sequence_last_step(enc).data  # one context row per source

    def decode_steps(self, trg_in, state):
        """Teacher forcing: the decoder GRU over whole target prefixes, started at ``state``."""
        dec = self.decoder(self.dec_proj(self.trg_emb(trg_in)), h_0=state)
        return torch.log_softmax(self.out(dec).data, dim=1)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(70):
    src, trg_in, trg = (t.to_torch() for t in batch(64))
    logp = model.decode_steps(trg_in, model.encode(src))
    loss = torch.nn.functional.nll_loss(logp, trg.data.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 30 == 0:
        print(f"step {step:3d}  loss {loss.item():.3f}")


@torch.no_grad()
def beam_decode(src, beam_size):
    """Paddle's beam-search loop: all sources and all their beams advance one step at a time."""
    n = len(src)
    state = model.encode(src.to_torch())
    identity = list(range(n + 1))
    pre_ids = lt.LoDTensor(np.full((n, 1), BOS), [identity, identity])  # source -> 1 prefix -> 1 row
    pre_scores = pre_ids.with_data(np.zeros((n, 1), "float32"))
    ids_array, scores_array = LoDTensorArray([pre_ids]), LoDTensorArray([pre_scores])
    for _ in range(MAX_LEN):
        rows = pre_ids.num_rows
        one_step = lt.LoDTensor(torch.from_numpy(pre_ids.numpy()), [list(range(rows + 1))])
        state = model.decoder(model.dec_proj(model.trg_emb(one_step)), h_0=state).data  # one GRU step
        logp = torch.log_softmax(model.out(state), dim=1).numpy()
        top_ids = np.argsort(-logp, axis=1, kind="stable")[:, :beam_size]
        accu = pre_scores.numpy() + np.take_along_axis(logp, top_ids, axis=1)
        step_lod = [pre_ids._lod.absolute_offsets(0).tolist(), list(range(rows + 1))]
        sel_ids, sel_scores, parent = L.beam_search(
            pre_ids, pre_scores, lt.LoDTensor(top_ids, step_lod), lt.LoDTensor(accu.astype("float32"), step_lod),
            beam_size, end_id=EOS, return_parent_idx=True)
        if sel_ids.num_rows == 0:  # every source finished
            break
        ids_array.append(sel_ids)
        scores_array.append(sel_scores)
        state = state[torch.from_numpy(parent.astype("int64"))]
        sources = sel_ids._lod.absolute_offsets(0).tolist()
        pre_ids = lt.LoDTensor(sel_ids.numpy(), [sources, list(range(sel_ids.num_rows + 1))])
        pre_scores = pre_ids.with_data(sel_scores.numpy())
    return L.beam_search_decode(ids_array, scores_array, beam_size, end_id=EOS)


@torch.no_grad()
def log_prob(src_tokens, sentence):
    """The model's log-probability of ``sentence`` (BOS ... EOS) for one source, teacher-forced."""
    src = lt.LoDTensor(torch.as_tensor(src_tokens).reshape(-1, 1), [[0, len(src_tokens)]])
    trg_in = lt.LoDTensor(torch.as_tensor(sentence[:-1]).reshape(-1, 1), [[0, len(sentence) - 1]])
    logp = model.decode_steps(trg_in, model.encode(src))
    return float(logp[torch.arange(len(sentence) - 1), torch.as_tensor(sentence[1:])].sum())


src, _, _ = batch(40)
sent_ids, sent_scores = beam_decode(src, beam_size=3)
greedy_ids, greedy_scores = beam_decode(src, beam_size=1)
print("sentences per source:", np.diff(sent_ids.offsets(0)).tolist()[:10], "...")
correct = 0
for i in range(len(src)):
    source = src[i].numpy().ravel().tolist()
    sentences, scores = sent_ids[i], sent_scores[i]
    best = sentences[0].numpy().tolist()
    for k in range(len(sentences)):
        tokens, final = sentences[k].numpy().tolist(), float(scores[k].numpy()[-1])
        if tokens[-1] == EOS:  # a finished hypothesis: its score is its log-probability
            assert abs(log_prob(source, tokens) - final) < 1e-3, (tokens, final)
    assert float(scores[0].numpy()[-1]) >= float(greedy_scores[i].numpy()[-1]) - 1e-5
    correct += best[1:-1] == source[::-1]
    if i < 3:
        print(f"source {source} -> best {best[1:-1]}  score {float(scores[0].numpy()[-1]):.3f}")
print(f"reversed correctly: {correct}/{len(src)}")
assert correct >= 0.7 * len(src), correct

"""nn.LSTM and nn.GRU on emu (the fused cell kernels and their backward) against CPU, and training them."""

import copy

import pytest
import torch

# The deep tier (smoke.tiers: once per build): results against the CPU reference depend on the wheel and torch alone.
pytestmark = [pytest.mark.feature("recurrent"), pytest.mark.deep]

CELLS = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}


@pytest.mark.parametrize("kind", list(CELLS))
@pytest.mark.parametrize(
    "options",
    [{}, {"num_layers": 2, "bias": False}, {"bidirectional": True, "batch_first": True}],
    ids=["plain", "2layers_nobias", "bidirectional_batch_first"],
)
def test_forward_and_gradients_match_cpu(kind, options):
    torch.manual_seed(0)
    model = CELLS[kind](5, 7, dtype=torch.float64, **options)
    model_emu = copy.deepcopy(model).to("emu")
    x = torch.randn(4, 3, 5, dtype=torch.float64, requires_grad=True)
    xe = x.detach().emu().requires_grad_()
    out, state = model(x)
    out_e, state_e = model_emu(xe)
    torch.testing.assert_close(out_e.cpu(), out)
    states, states_e = (state, state_e) if kind == "lstm" else ((state,), (state_e,))
    for s, se in zip(states, states_e):
        torch.testing.assert_close(se.cpu(), s)
    grad = torch.randn_like(out)
    # The final cell state alone also carries a gradient (the LSTM backward with grad_hy undefined for it).
    (out * grad).sum().add(states[-1].sum()).backward()
    (out_e * grad.emu()).sum().add(states_e[-1].sum()).backward()
    torch.testing.assert_close(xe.grad.cpu(), x.grad)
    for (name, p), pe in zip(model.named_parameters(), model_emu.parameters()):
        torch.testing.assert_close(pe.grad.cpu(), p.grad, msg=name)


def test_lstm_cell_state_only_gradient():
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(3, 4, dtype=torch.float64)
    cell_emu = copy.deepcopy(cell).to("emu")
    x = torch.randn(2, 3, dtype=torch.float64)
    _, c = cell(x)
    _, ce = cell_emu(x.emu())
    c.sum().backward()
    ce.sum().backward()
    for (name, p), pe in zip(cell.named_parameters(), cell_emu.parameters()):
        torch.testing.assert_close(pe.grad.cpu(), p.grad, msg=name)


@pytest.mark.parametrize("kind", list(CELLS))
def test_sequence_model_trains_like_cpu(kind):
    torch.manual_seed(0)

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = CELLS[kind](6, 8, num_layers=2)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0][-1])

    model = Tagger()
    data, target = torch.randn(5, 4, 6), torch.randint(0, 3, (4,))

    def train(m, device):
        m = m.to(device)
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(data.to(device)), target.to(device))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    cpu = train(copy.deepcopy(model), "cpu")
    emu = train(copy.deepcopy(model), "emu")
    assert emu[-1] < emu[0]
    assert emu == pytest.approx(cpu, rel=1e-4, abs=1e-5)

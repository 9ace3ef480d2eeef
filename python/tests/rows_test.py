"""Embedding rows from Python through real ps_server processes: Client.pull_rows,
push_rows and push_pull_rows (rows in caller order, repeated ids summed, bit for bit as
numpy's float32 sgd), their errors, and ps.torch.Embedding training with
DistributedOptimizer in sync (two workers against single-process torch on the
concatenated batch) and async mode.

Run by //python:rows_test (python/tests/run_python_test.sh)."""

import unittest

import numpy as np
import torch

import ps
import ps.torch
from cluster import Cluster, in_threads

torch.set_num_threads(1)
LR = 0.1  # dense --lr and --sparse_lr alike
DIM = 4
TABLE = ps.Table("emb", DIM, seed=7, init_scale=0.5)


def sgd_flags(lr=LR):
    return ["--sparse_optimizer=sgd", f"--sparse_lr={lr}"]


def connect(c, w, workers, tables=(TABLE,)):
    client = ps.Client(c.servers, w, workers, connect_timeout=10, wait_timeout=30)
    if tables:
        client.declare_tables(list(tables))
    return client


def dense():
    return {"w": np.zeros(3, np.float32)}


def summed(ids, grads):
    """float32 sums of the rows of each distinct id, in caller order (as the client sums)."""
    out = {}
    for i, g in zip(ids, grads):
        out[int(i)] = out[int(i)] + g if int(i) in out else g.copy()
    return out


class RowsTest(unittest.TestCase):
    def test_round_trip_in_caller_order_with_repeated_ids_summed(self):
        ids = np.array([5, 2**40 + 3, 5, 0, 17, 5, 0], np.uint64)  # repeats, any order
        rng = np.random.default_rng(0)
        grads = rng.standard_normal((len(ids), DIM)).astype(np.float32)
        for mode in ("sync", "async"):
            with self.subTest(mode=mode), \
                    Cluster(shards=2, workers=1, mode=mode, lr=LR, extra=sgd_flags(0.5)) as c:
                client = connect(c, 0, 1)
                self.assertEqual(client.tables, [TABLE])
                client.init(dense())
                before = client.pull_rows("emb", ids)
                self.assertEqual(before.shape, (len(ids), DIM))
                self.assertEqual(before.dtype, np.float32)
                # A repeated id's rows are its row, wherever it stands.
                np.testing.assert_array_equal(before[0], before[2])
                np.testing.assert_array_equal(before[0], before[5])
                np.testing.assert_array_equal(before[3], before[6])
                self.assertTrue(np.all(np.abs(before) <= 0.5))
                self.assertEqual(len({before[k].tobytes() for k in range(5)}), 4)
                # The same rows in another order, from int64 ids and a list, into out=.
                out = np.empty((3, DIM), np.float32)
                got = client.pull_rows("emb", [17, 0, 5], out=out)
                self.assertIs(got, out)
                np.testing.assert_array_equal(out, before[[4, 3, 0]])
                np.testing.assert_array_equal(
                    client.pull_rows("emb", torch.tensor([17, 5], dtype=torch.int64)),
                    before[[4, 0]])
                self.assertEqual(client.pull_rows("emb", []).shape, (0, DIM))

                client.push_rows("emb", ids, grads)
                if mode == "sync":  # held until the step closes with the dense gradient
                    np.testing.assert_array_equal(client.pull_rows("emb", ids), before)
                    client.push_pull({"w": np.ones(3, np.float32)})
                after = client.pull_rows("emb", ids)
                sums = summed(ids, grads)
                lr = np.float32(0.5)
                want = np.stack([before[k] - lr * sums[int(i)] for k, i in enumerate(ids)])
                np.testing.assert_array_equal(after, want)
                if mode == "sync":  # pushed rows change when the step closes
                    with self.assertRaisesRegex(ps.FailedPrecondition, "PushPullRowsAsync"):
                        client.push_pull_rows("emb", ids, grads)
                    continue
                # Async: the same push again, and the rows after it, in one call.
                both = client.push_pull_rows("emb", ids, grads)
                want2 = np.stack([after[k] - lr * sums[int(i)] for k, i in enumerate(ids)])
                np.testing.assert_array_equal(both, want2)
                np.testing.assert_array_equal(client.pull_rows("emb", ids), want2)
                out = np.empty((len(ids), DIM), np.float32)
                self.assertIs(client.push_pull_rows("emb", ids, grads, out=out), out)

    def test_start_push_pull_rows_answers_the_rows_of_the_step_that_closes(self):
        ids = [np.array([3, 9, 3, 40], np.uint64), np.array([9, 7], np.uint64)]
        grads = [np.full((4, DIM), 1.0, np.float32), np.full((2, DIM), 3.0, np.float32)]
        with Cluster(shards=2, workers=2, mode="sync", lr=LR, extra=sgd_flags(0.5)) as c:
            clients = [connect(c, w, 2) for w in (0, 1)]
            in_threads(lambda w: clients[w].init(dense()), 60)
            before = clients[0].pull_rows("emb", [3, 9, 40, 7])
            got = [None, None]

            def step(w):
                h = clients[w].start_push_pull_rows("emb", ids[w], grads[w])
                self.assertIsInstance(h, ps.PushPullRowsInProgress)
                clients[w].push_pull({"w": np.ones(3, np.float32)})  # closes the step
                got[w] = h.wait()
            in_threads(step, 60)
            after = clients[0].pull_rows("emb", [3, 9, 40, 7])
            # The step's mean over 2 workers at lr 0.5: id 3 was pushed twice
            # by worker 0 (2.0), id 9 by both (1 + 3), 40 once, 7 by worker 1.
            lr, n = np.float32(0.5), np.float32(2)
            want = before - lr * np.array([[2.0], [4.0], [1.0], [3.0]], np.float32) / n
            np.testing.assert_array_equal(after, want)
            np.testing.assert_array_equal(got[0], after[[0, 1, 0, 2]])
            np.testing.assert_array_equal(got[1], after[[1, 3]])
            # Into `out`; a second push of the table in the step is refused.
            out = np.empty((2, DIM), np.float32)
            h = clients[1].start_push_pull_rows("emb", ids[1], grads[1], out=out)
            with self.assertRaisesRegex(ps.FailedPrecondition, "already pushed for step 1"):
                clients[1].start_push_pull_rows("emb", ids[1], grads[1]).wait()
            with self.assertRaisesRegex(ValueError, "rows of table 'emb': shape"):
                clients[1].start_push_pull_rows("emb", ids[1], grads[1],
                                                out=np.empty((3, DIM), np.float32))
            clients[0].push_rows("emb", [5], np.zeros((1, DIM), np.float32))
            in_threads(lambda w: clients[w].push_pull({"w": np.ones(3, np.float32)}), 60)
            self.assertIs(h.wait(), out)
            np.testing.assert_array_equal(out, clients[1].pull_rows("emb", ids[1]))
            with self.assertRaisesRegex(ValueError, "wait called twice"):
                h.wait()

    def test_errors_name_the_table(self):
        with Cluster(shards=1, workers=1, mode="sync", lr=LR, extra=sgd_flags()) as c:
            client = connect(c, 0, 1)
            with self.assertRaisesRegex(TypeError, "expected ps.Table"):
                client.declare_tables([{"name": "x", "dim": 2}])
            with self.assertRaisesRegex(ps.InvalidArgument, "dim"):
                client.declare_tables([ps.Table("bad", 0)])
            self.assertEqual(client.tables, [TABLE])  # a refused declaration changes nothing
            client.init(dense())
            with self.assertRaises(ps.FailedPrecondition):
                client.declare_tables([TABLE])
            with self.assertRaisesRegex(ValueError, "'nope' was not declared"):
                client.pull_rows("nope", [1])
            with self.assertRaisesRegex(ValueError, "'emb': id -3 is negative"):
                client.pull_rows("emb", np.array([1, -3, 2]))
            with self.assertRaisesRegex(TypeError, "'emb': dtype float64"):
                client.pull_rows("emb", np.array([1.0, 2.0]))
            with self.assertRaisesRegex(ValueError, "'emb': shape \\(2, 1\\)"):
                client.pull_rows("emb", np.array([[1], [2]]))
            with self.assertRaisesRegex(ValueError, "rows of table 'emb': shape"):
                client.pull_rows("emb", [1, 2], out=np.empty((3, DIM), np.float32))
            ids = [1, 2]
            with self.assertRaisesRegex(TypeError, "gradient rows of table 'emb': dtype float64"):
                client.push_rows("emb", ids, np.zeros((2, DIM)))
            with self.assertRaisesRegex(ValueError, "gradient rows of table 'emb': shape"):
                client.push_rows("emb", ids, np.zeros((2, DIM + 1), np.float32))
            with self.assertRaisesRegex(ValueError, "gradient rows of table 'emb': not C-cont"):
                client.push_rows("emb", ids, np.zeros((DIM, 2), np.float32).T)
            with self.assertRaisesRegex(ValueError, "'emb': id -1 is negative"):
                client.push_rows("emb", [-1, 2], np.zeros((2, DIM), np.float32))
            # The extension's fast path takes only plain arrays and calls nothing otherwise.
            rows = np.empty((1, DIM), np.float32)
            for ids_, out_ in ((np.array([1.0]), rows), (np.array([-1]), rows), ([1], rows),
                               (np.array([1], np.uint64), rows[:, :1]), (np.array([1]), None)):
                fast = client._c.pull_rows("nope" if out_ is None else "emb", ids_, out_)
                self.assertIsNone(fast, (ids_, out_))
            self.assertIs(client._c.pull_rows("emb", np.array([1]), rows), rows)
            self.assertIsNone(client._c.push_rows("emb", np.array([1]), rows.T))
            # Sync: one push per table per step (the servers would drop a second).
            client.push_rows("emb", ids, np.ones((2, DIM), np.float32))
            with self.assertRaisesRegex(ps.FailedPrecondition,
                                        "\"emb\": its rows were already pushed for step 0"):
                client.push_rows("emb", ids, np.ones((2, DIM), np.float32))
            client.push_pull(dense())
            client.push_rows("emb", ids, np.ones((2, DIM), np.float32))  # step 1: fine

    def test_embedding_refuses_what_it_cannot_serve(self):
        with Cluster(shards=1, workers=1, mode="async", lr=LR) as c:
            client = connect(c, 0, 1, tables=())
            emb = ps.torch.Embedding("e", 3, client)
            self.assertEqual(client.tables, [ps.Table("e", 3)])
            ps.torch.Embedding("e", 3, client)  # already declared: fine
            with self.assertRaisesRegex(ValueError, "'e': dim 5.*dim 3"):
                ps.torch.Embedding("e", 5, client)
            self.assertEqual(list(emb.parameters()), [])
            client.init(dense())
            with self.assertRaisesRegex(ValueError, "before DistributedOptimizer"):
                ps.torch.Embedding("late", 3, client)
            with self.assertRaisesRegex(TypeError, "'e': ids of dtype torch.float32"):
                emb(torch.zeros(2))
            with self.assertRaisesRegex(ValueError, "negative"):
                emb(torch.tensor([0, -1]))
            out = emb(torch.tensor([[1, 2], [2, 9]], dtype=torch.int32))
            self.assertEqual(tuple(out.shape), (2, 2, 3))
            self.assertTrue(out.requires_grad)
            self.assertTrue(torch.equal(out[0, 1], out[1, 0]))


# --- Training: an Embedding and a Linear layer ---------------------------------
V, F, B, STEPS = 12, 3, 4, 15  # ids, fields per example, batch per worker, steps


class Model(torch.nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb
        self.fc = torch.nn.Linear(F * DIM, 3)

    def forward(self, ids):
        return self.fc(self.emb(ids).flatten(1))


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    # Few ids, so that a batch repeats ids within and across workers.
    return [(torch.randint(0, V, (2 * B, F), generator=g), torch.randint(0, 3, (2 * B,), generator=g))
            for _ in range(STEPS)]


def train_worker(model, opt, data, w, errors, sent_in_backward):
    try:
        for x, y in data:
            opt.zero_grad()
            xs, ys = x[w * B:(w + 1) * B], y[w * B:(w + 1) * B]
            torch.nn.functional.cross_entropy(model(xs), ys).backward()
            sent_in_backward.append(set(opt._sent))
            opt.step()
    except BaseException as e:  # reported by the main thread
        errors.append(e)


def two_workers(c, overlap, reuse_rows=False):
    """Two models and optimizers on `c`, made in two threads (sync init waits)."""
    clients = [connect(c, w, 2, tables=()) for w in (0, 1)]
    torch.manual_seed(0)
    models = [Model(ps.torch.Embedding("emb", DIM, clients[w], seed=7, init_scale=0.5,
                                       reuse_rows=reuse_rows))
              for w in (0, 1)]
    models[1].fc.load_state_dict(models[0].fc.state_dict())
    opts = [None, None]

    def make(w):
        opts[w] = ps.torch.DistributedOptimizer(models[w].named_parameters(), clients[w],
                                                overlap=overlap)

    in_threads(make, 60)
    return clients, models, opts


def run(models, opts, data):
    errors, sent = [], []
    in_threads(lambda w: train_worker(models[w], opts[w], data, w, errors, sent), 120)
    return errors, sent


class EmbeddingTrainingTest(unittest.TestCase):
    def test_two_sync_workers_match_torch_on_the_concatenated_batch(self):
        finals, pulled = {}, {}
        for overlap, reuse in ((True, False), (False, False), (True, True)):
            with self.subTest(overlap=overlap, reuse_rows=reuse):
                finals[reuse], pulled[reuse] = self.two_sync_workers_match_torch(overlap, reuse)
        # reuse_rows: the rows the last step's push-pull brought back are
        # exactly those a pull would answer, so training is bit for bit the
        # same, with fewer ids pulled (batches repeat ids: V is small).
        np.testing.assert_array_equal(finals[True], finals[False])
        print(f"ids and pull_rows calls by forward over {STEPS} steps of 2 workers: "
              f"{pulled[False]} without reuse_rows, {pulled[True]} with")
        self.assertLess(pulled[True][0], pulled[False][0] / 2)
        self.assertLessEqual(pulled[True][1], pulled[False][1])

    def two_sync_workers_match_torch(self, overlap, reuse_rows):
        data = batches(seed=3)
        with Cluster(shards=2, workers=2, mode="sync", lr=LR, extra=sgd_flags()) as c:
            clients, models, opts = two_workers(c, overlap, reuse_rows)
            pulled = [0, 0]  # ids and calls
            for client in clients:  # counts the ids the Embeddings pull
                def counted(table, ids, *, out=None, _pull=client.pull_rows):
                    pulled[0] += len(ids)
                    pulled[1] += 1
                    return _pull(table, ids, out=out)
                client.pull_rows = counted
            all_ids = np.arange(V)
            initial = clients[0].pull_rows("emb", all_ids)
            # The reference: the same initial rows and dense weights, locally.
            ref = Model(torch.nn.Embedding(V, DIM, sparse=True))
            with torch.no_grad():
                ref.emb.weight.copy_(torch.from_numpy(initial))
                ref.fc.load_state_dict(models[0].fc.state_dict())
            pulled[:] = [0, 0]
            errors, sent = run(models, opts, data)
            by_forward = tuple(pulled)
            self.assertEqual(errors, [])
            self.assertEqual(clients[0].version, STEPS)
            # The rule: with an Embedding no dense gradient leaves during
            # backward, whatever overlap says (step() sends them after the rows).
            self.assertEqual(sent, [set()] * (2 * STEPS))
            final = clients[0].pull_rows("emb", all_ids)

        sgd = torch.optim.SGD(ref.parameters(), lr=LR)
        for x, y in data:
            sgd.zero_grad()
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            sgd.step()

        # The servers apply the mean of the two workers' gradients (each a mean
        # over B examples) with the same sgd rule; torch takes one mean over 2B
        # and coalesces repeated ids in its own order. So they differ only by
        # float32 reassociation: a few ulps (eps 6e-8) per step and weight, far
        # below 1e-5 of the largest value after 15 steps.
        self.assertFalse(np.array_equal(final, initial), "the rows did not train")
        pairs = [("emb", torch.from_numpy(final), ref.emb.weight)]
        pairs += [(n, p, r) for (n, p), r in zip(models[0].fc.named_parameters(),
                                                  ref.fc.parameters())]
        worst = 0.0
        for n, got, want in pairs:
            rel = ((got - want).abs().max() / want.abs().max()).item()
            worst = max(worst, rel)
            self.assertLessEqual(rel, 1e-5, n)
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            self.assertTrue(torch.equal(p, q))
        print(f"overlap={overlap}: max relative difference to torch on the concatenated batch: "
              f"{worst:.3g}")
        return final, by_forward

    def test_async_workers_train(self):
        data = batches(seed=4)
        with Cluster(shards=2, workers=2, mode="async", lr=LR, extra=sgd_flags()) as c:
            clients = [connect(c, w, 2, tables=()) for w in (0, 1)]
            torch.manual_seed(1)
            models = [Model(ps.torch.Embedding("emb", DIM, clients[w], seed=7, init_scale=0.5))
                      for w in (0, 1)]
            opts = [ps.torch.DistributedOptimizer(models[w].named_parameters(), clients[w])
                    for w in (0, 1)]

            def loss():
                with torch.no_grad():
                    return sum(torch.nn.functional.cross_entropy(models[0](x), y).item()
                               for x, y in data)

            initial = clients[0].pull_rows("emb", np.arange(V))
            loss_before = loss()
            errors, _ = run(models, opts, data)
            self.assertEqual(errors, [])
            final = clients[0].pull_rows("emb", np.arange(V))
            self.assertFalse(np.array_equal(final, initial))
            weights = clients[0].pull()
            with torch.no_grad():
                for n, p in models[0].named_parameters():
                    p.copy_(torch.from_numpy(weights[n]))
            self.assertLess(loss(), loss_before)


if __name__ == "__main__":
    unittest.main(verbosity=2)

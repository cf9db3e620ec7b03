"""The Python binding (sdk/python, module tessera_sdk) against a real
`tessera node` (frontend, router and a CPU worker in one process, UCX over
loopback tcp, a cluster secret and an API key file), started here as
SdkClusterTest starts it: a greedy (and a seeded) completion gives the
tokens of the C++ SDK (tessera-client --json) and of HTTP; streaming yields
the same tokens; a wrong secret raises Error with status 401; Ctrl-C in a
blocking call or a stream cancels the request and frees it on the cluster.

Run by ctest (tests/CMakeLists.txt), which sets PYTHONPATH to the module's
folder and TESSERA_BIN / TESSERA_CLIENT_BIN to the binaries.
"""

import json
import os
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import tessera_sdk

TESSERA = os.environ["TESSERA_BIN"]
CLIENT = os.environ["TESSERA_CLIENT_BIN"]
API_KEY = "sk-sdk-python-0123456789"
SECRET = "test-cluster-secret-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


class PythonSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tessera-python-sdk-")
        d = cls.tmp.name
        # tiny, not nano: nano writes its whole context in ~30 ms, too fast for
        # a Ctrl-C to land in the middle of a request.
        subprocess.run([TESSERA, "model", "init", "--shape", "tiny", "--out", f"{d}/model"],
                       check=True, capture_output=True)
        cls.secret_file = f"{d}/cluster.secret"
        private_file(cls.secret_file, SECRET + "\n")
        private_file(f"{d}/keys.toml", f'[[key]]\nkey = "{API_KEY}"\ntenant = "t"\n')
        cls.address = f"127.0.0.1:{free_port()}"
        cls.http = f"http://127.0.0.1:{free_port()}"
        with open(f"{d}/c.toml", "w") as f:
            f.write(f'model = "{d}/model"\nserved_model_name = "tiny"\nthreads_per_worker = 1\n'
                    'kv_cache_mb = 64\nucx_tls = "tcp"\ncluster_secret_file = "cluster.secret"\n'
                    'api_keys_file = "keys.toml"\n'
                    f'[[node]]\nid = "front"\naddress = "{cls.address}"\n'
                    f'roles = ["frontend", "router", "worker"]\nhttp = "{cls.http[7:]}"\n')
        cls.log = open(f"{d}/front.log", "w")
        cls.node = subprocess.Popen([TESSERA, "node", "--config", f"{d}/c.toml", "--node", "front"],
                                    stdout=subprocess.DEVNULL, stderr=cls.log)
        deadline = time.time() + 60
        while time.time() < deadline:
            if cls.node.poll() is not None:
                raise RuntimeError(f"the node exited with {cls.node.returncode}; see {d}/front.log")
            try:
                with urllib.request.urlopen(cls.http + "/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("the node did not become ready in 60 s")
        cls.client = tessera_sdk.Client(cls.address, cluster_secret_file=cls.secret_file,
                                        api_key=API_KEY, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.node.send_signal(signal.SIGTERM)
        try:
            cls.node.wait(30)
        except subprocess.TimeoutExpired:
            cls.node.kill()
        cls.log.close()
        cls.tmp.cleanup()

    # -- helpers --------------------------------------------------------------

    def post(self, path, body, key=API_KEY):
        req = urllib.request.Request(self.http + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def metric(self, name):
        req = urllib.request.Request(self.http + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return -1.0

    def cxx_sdk(self, prompt, max_tokens, temperature, seed=None):
        args = [CLIENT, "--connect", self.address, "--cluster-secret-file", self.secret_file,
                "--prompt", prompt, "--max-tokens", str(max_tokens), "--temperature", str(temperature),
                "--api-key", API_KEY, "--ignore-eos", "--json"]
        if seed is not None:
            args += ["--seed", str(seed)]
        out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout)

    def wait_idle(self):
        for _ in range(200):
            if self.metric("tessera_requests_in_flight") == 0:
                return True
            time.sleep(0.05)
        return False

    # -- tests ----------------------------------------------------------------

    def test_completion_equals_cxx_sdk_and_http(self):
        for temperature, seed in ((0.0, None), (1.0, 1234)):
            with self.subTest(temperature=temperature, seed=seed):
                py = self.client.complete("The quick brown fox", max_tokens=12, temperature=temperature,
                                          seed=seed, ignore_eos=True)
                cxx = self.cxx_sdk("The quick brown fox", 12, temperature, seed)
                body = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 12,
                        "temperature": temperature, "ignore_eos": True}
                if seed is not None:
                    body["seed"] = seed
                http = self.post("/v1/completions", body)
                self.assertEqual(len(py["token_ids"]), 12)
                self.assertEqual(py["token_ids"], cxx["token_ids"])
                self.assertEqual(py["prompt_token_ids"], cxx["prompt_token_ids"])
                self.assertEqual(py["text"], cxx["text"])
                self.assertEqual(py["text"], http["choices"][0]["text"])
                self.assertEqual(py["finish_reason"], "length")
                self.assertEqual(py["model"], "tiny")
                self.assertIsNone(py["logprobs"])
        # Token ids as the prompt, and a chat.
        ids = self.client.complete([5, 6, 7, 8], max_tokens=6, temperature=0, ignore_eos=True)
        http = self.post("/v1/completions", {"model": "tiny", "prompt": [5, 6, 7, 8], "max_tokens": 6,
                                             "temperature": 0, "ignore_eos": True})
        self.assertEqual(ids["prompt_token_ids"], [5, 6, 7, 8])
        self.assertEqual(ids["text"], http["choices"][0]["text"])
        chat = self.client.complete(messages=[{"role": "user", "content": "hello"}], max_tokens=8,
                                    temperature=0, ignore_eos=True)
        http = self.post("/v1/chat/completions", {"model": "tiny", "max_tokens": 8, "temperature": 0,
                                                  "ignore_eos": True,
                                                  "messages": [{"role": "user", "content": "hello"}]})
        self.assertEqual(chat["text"], http["choices"][0]["message"]["content"])

    def test_stream_yields_the_same_tokens(self):
        whole = self.client.complete("Once upon a time", max_tokens=16, temperature=0, ignore_eos=True,
                                     logprobs=True, top_logprobs=2)
        tokens, text, chunks, finish, lps = [], "", 0, None, []
        for ch in self.client.stream("Once upon a time", max_tokens=16, temperature=0, ignore_eos=True,
                                     logprobs=True, top_logprobs=2):
            chunks += 1
            tokens += ch["tokens"]
            text += ch["text"]
            lps += ch["logprobs"] or []
            self.assertEqual(ch["output_tokens"], len(tokens))
            finish = ch["finish_reason"] or finish
        self.assertEqual(tokens, whole["token_ids"])
        self.assertEqual(text, whole["text"])
        self.assertEqual(finish, "length")
        self.assertGreaterEqual(chunks, 2)
        self.assertEqual(lps, whole["logprobs"])
        self.assertEqual([t["token"] for t in lps], tokens)
        self.assertTrue(all(len(t["top_logprobs"]) == 2 and t["logprob"] <= 0 for t in lps))

    def test_wrong_secret_raises_401(self):
        with self.assertRaises(tessera_sdk.Error) as caught:
            tessera_sdk.Client(self.address, cluster_secret="not-the-cluster-secret-0123456789",
                               connect_timeout=5)
        e = caught.exception
        self.assertEqual(e.status, 401, e.message)
        self.assertEqual(e.kind, "unauthorized")
        self.assertIn("cluster secret", e.message)
        self.assertIn("cluster secret", str(e))

    def test_http_errors_raise_with_their_fields(self):
        http = self.post("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 4},
                         key="sk-wrong-key-0000000000")
        with self.assertRaises(tessera_sdk.Error) as caught:
            self.client.complete("hi", max_tokens=4, api_key="sk-wrong-key-0000000000")
        e = caught.exception
        self.assertEqual(e.status, 401)
        self.assertEqual(e.type, http["error"]["type"])
        self.assertEqual(e.message, http["error"]["message"])
        self.assertEqual(e.code, http["error"]["code"])
        # Bad arguments are refused before anything is sent, naming them.
        for kwargs, param in ((dict(prompt=3.5), "prompt"), (dict(prompt=[1, -2]), "prompt[1]"),
                              (dict(prompt=[1, 2 ** 40]), "prompt[1]"), (dict(), "prompt"),
                              (dict(prompt="x", messages=[{"role": "user", "content": "y"}]), "prompt"),
                              (dict(messages=[{"role": "user"}]), "messages[0]"),
                              (dict(prompt="x", top_logprobs=3), "top_logprobs"),
                              (dict(prompt="x", logprobs=True, top_logprobs=21), "top_logprobs")):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(tessera_sdk.Error) as caught:
                    self.client.complete(**kwargs)
                self.assertEqual(caught.exception.status, 400)
                self.assertEqual(caught.exception.param, param)
        # A field the server checks: the HTTP API's answer (an unknown model: 404).
        with self.assertRaises(tessera_sdk.Error) as caught:
            self.client.complete("x", model="no-such-model")
        self.assertEqual(caught.exception.status, 404)

    def interrupt_after(self, seconds):
        timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        return timer

    def test_ctrl_c_cancels_and_frees_the_request(self):
        long_output = self.client.health()["max_model_len"] - 16
        # A blocking complete(), then a stream read in a loop: Ctrl-C in
        # either cancels the request on the cluster. A slow machine may
        # finish the request before the signal: then try again (3 times).
        for how in ("complete", "stream"):
            with self.subTest(how=how):
                freed = False
                for _ in range(3):
                    before = self.metric("tessera_requests_cancelled_total")
                    timer = self.interrupt_after(0.3)
                    interrupted = False
                    try:
                        if how == "complete":
                            self.client.complete("A long story", max_tokens=long_output, temperature=0,
                                                 ignore_eos=True)
                        else:
                            with self.client.stream("A long story", max_tokens=long_output, temperature=0,
                                                    ignore_eos=True) as s:
                                for _ in s:
                                    pass
                    except KeyboardInterrupt:
                        interrupted = True
                    try:  # a signal that came after the call ended lands here
                        timer.join()
                        time.sleep(0.05)
                    except KeyboardInterrupt:
                        pass
                    if not interrupted:
                        continue  # the request finished before the signal came
                    self.assertTrue(self.wait_idle(), "the frontend still holds the interrupted request")
                    freed = self.metric("tessera_requests_cancelled_total") > before
                    if freed:
                        break
                self.assertTrue(freed, f"Ctrl-C during {how} never reached the frontend as a cancel")
        # The client goes on.
        self.assertEqual(len(self.client.complete("x", max_tokens=3, temperature=0, ignore_eos=True)["token_ids"]), 3)

    def test_cancel_and_a_dropped_stream_free_the_request(self):
        long_output = self.client.health()["max_model_len"] - 16
        s = self.client.stream("A long story", max_tokens=long_output, temperature=0, ignore_eos=True)
        self.assertTrue(next(s)["tokens"])
        self.client.cancel(s)
        with self.assertRaises(tessera_sdk.Error) as caught:
            for _ in s:
                pass
        self.assertEqual(caught.exception.status, 499)
        self.assertEqual(caught.exception.kind, "cancelled")
        self.assertTrue(self.wait_idle())
        s = self.client.stream("A long story", max_tokens=long_output, temperature=0, ignore_eos=True)
        next(s)
        del s  # dropped mid-answer: cancelled
        self.assertTrue(self.wait_idle(), "a dropped stream's request still runs")

    def test_models_and_health(self):
        self.assertEqual(self.client.models(), ["tiny"])
        h = self.client.health()
        self.assertTrue(h["ready"])
        self.assertEqual(h["workers"], 1)
        self.assertEqual(h["healthy_workers"], 1)
        self.assertGreater(h["max_model_len"], 0)
        self.assertFalse(h["draining"])
        self.assertTrue(self.client.node_id.startswith("sdk-"))
        with tessera_sdk.Client(self.address, cluster_secret_file=self.secret_file) as c:
            self.assertEqual(c.models(), ["tiny"])
        with self.assertRaises(tessera_sdk.Error) as caught:
            c.models()
        self.assertEqual(caught.exception.status, 503)


if __name__ == "__main__":
    unittest.main(verbosity=2)

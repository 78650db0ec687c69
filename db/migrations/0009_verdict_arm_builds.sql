-- 0009_verdict_arm_builds: a verdict refers to the builds its arms ran by id. Before, it kept only
-- each arm's label, "<name>@<sha256 prefix>" for a build, so the build it named had to be found by
-- text. The label stays for arms it says more of ("mmq", "f16", "MINFER_MMQ=1", commands); a build's
-- own label is read back from the build and no longer stored.
ALTER TABLE verdicts ADD COLUMN arm_a_build_id INTEGER REFERENCES builds(id);
ALTER TABLE verdicts ADD COLUMN arm_b_build_id INTEGER REFERENCES builds(id);

-- Arm A ran the job's build and arm B its baseline, or the job's build again for an A/B of one
-- build (no baseline). A command job's arms ran programs; they ran a build only where their label
-- names it.
UPDATE verdicts SET
    arm_a_build_id = (SELECT j.build_id FROM jobs j WHERE j.id = verdicts.job_id),
    arm_b_build_id = (SELECT COALESCE(j.baseline_build_id, j.build_id) FROM jobs j WHERE j.id = verdicts.job_id)
WHERE (arm_a_label <> '' OR arm_b_label <> '')
  AND job_id IN (SELECT id FROM jobs WHERE kind <> 'command');
UPDATE verdicts SET
    arm_a_build_id = (SELECT b.id FROM jobs j JOIN builds b ON b.id = j.build_id
                      WHERE j.id = verdicts.job_id AND verdicts.arm_a_label = b.name || '@' || substr(b.sha256, 1, 8)),
    arm_b_build_id = (SELECT b.id FROM jobs j JOIN builds b ON b.id = j.baseline_build_id
                      WHERE j.id = verdicts.job_id AND verdicts.arm_b_label = b.name || '@' || substr(b.sha256, 1, 8))
WHERE job_id IN (SELECT id FROM jobs WHERE kind = 'command');

UPDATE verdicts SET arm_a_label = ''
WHERE arm_a_label = (SELECT b.name || '@' || substr(b.sha256, 1, 8) FROM builds b WHERE b.id = verdicts.arm_a_build_id);
UPDATE verdicts SET arm_b_label = ''
WHERE arm_b_label = (SELECT b.name || '@' || substr(b.sha256, 1, 8) FROM builds b WHERE b.id = verdicts.arm_b_build_id);

CREATE INDEX verdicts_by_arm_a_build ON verdicts (arm_a_build_id);
CREATE INDEX verdicts_by_arm_b_build ON verdicts (arm_b_build_id);

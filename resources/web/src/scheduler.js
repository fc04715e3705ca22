// A run handed to a cluster scheduler (issue 35) as the pages show it: the run page's
// "Slurm job 4242: PENDING (Resources)" beside its status, and the job in the runs list's status
// cell. Other runs (no `scheduler` in their JSON) show nothing more.

import { el, statusBadge } from './dom.js';

function schedulerName(job) {
  return job.kind === 'slurm' ? 'Slurm' : String(job.kind);
}

// "Slurm job 4242: PENDING (Resources)"; the state and reason only where the scheduler gave them.
export function schedulerText(job) {
  let text = `${schedulerName(job)} job ${job.job_id}`;
  if (job.state) text += `: ${job.state}`;
  if (job.reason) text += ` (${job.reason})`;
  return text;
}

// The run page's line under its title: the job, its state and reason, and its nodes once
// allocated; null for a run no scheduler ran.
export function schedulerLine(run) {
  const job = run.scheduler;
  if (!job) return null;
  return el('div', { class: 'scheduler-job', id: 'scheduler-job' }, schedulerText(job),
    job.nodes ? ` on ${job.nodes}` : null);
}

// The runs list's status cell: the badge, and a scheduler's job id and state beside it.
export function runStatusCell(run) {
  const job = run.scheduler;
  if (!job) return statusBadge(run.status);
  const word = job.state ? `: ${job.state}` : '';
  return el('span', {}, statusBadge(run.status), ' ',
    el('span', { class: 'muted scheduler-job', title: schedulerText(job) }, `${schedulerName(job)} ${job.job_id}${word}`));
}

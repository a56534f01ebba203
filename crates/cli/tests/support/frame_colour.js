// The mean colour of a live page's newest frame (its `#view` image), as [red, green, blue]; run
// in the page with Playwright's `page.evaluate(meanColour)`.
module.exports.meanColour = () => {
  const view = document.getElementById('view');
  const canvas = document.createElement('canvas');
  canvas.width = 64;
  canvas.height = 36;
  const context = canvas.getContext('2d');
  context.drawImage(view, 0, 0, 64, 36);
  const pixels = context.getImageData(0, 0, 64, 36).data;
  const sum = [0, 0, 0];
  for (let i = 0; i < pixels.length; i += 4) for (let c = 0; c < 3; c += 1) sum[c] += pixels[i + c];
  const count = pixels.length / 4;
  return sum.map((value) => Math.round(value / count));
};
